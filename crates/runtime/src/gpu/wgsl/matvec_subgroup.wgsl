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
    let valid = row < p.rows;
    let acc = partial_sums(row, valid, t0, n, lid.x, SG);
    // With MODE_GLU each gate row's up row too (p.mode is uniform: every thread sums).
    var up: array<f32, TILE>;
    if (p.mode == MODE_GLU) {
        up = partial_sums(row + p.half, valid, t0, n, lid.x, SG);
    }
    // `n` is the same for the whole workgroup, so every thread takes part in every sum.
    for (var i = 0u; i < n; i++) {
        let sum = subgroupAdd(acc[i]);
        var up_sum = 0.0;
        if (p.mode == MODE_GLU) {
            up_sum = subgroupAdd(up[i]);
        }
        if (lid.x == 0u && valid) {
            store(t0 + i, row, sum, up_sum);
        }
    }
}
