// The matrix product's entry point with subgroup operations: a workgroup is SG threads, the
// adapter's smallest subgroup (SG is prepended by kernels.rs), so the whole workgroup is
// one subgroup and `subgroupAdd` gives each token's sum with no workgroup memory and no
// barrier. The kernel checks run this variant wherever it is used, so an adapter that
// split such a workgroup would fail them and not be trusted.

@compute @workgroup_size(SG)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
    let row = wg.x + wg.y * p.row_groups;
    let t0 = wg.z * TILE;
    let n = min(TILE, p.tokens - t0);
    let acc = partial_sums(row, t0, n, lid.x, SG);
    // `n` is the same for the whole workgroup, so every thread takes part in every sum.
    for (var i = 0u; i < n; i++) {
        let sum = subgroupAdd(acc[i]);
        if (lid.x == 0u && row < p.rows) {
            y[(t0 + i) * p.out_rows + p.first_row + row] = sum;
        }
    }
}
