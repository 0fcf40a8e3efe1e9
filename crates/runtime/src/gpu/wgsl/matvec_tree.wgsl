// The matrix product's entry point without subgroup operations: 64 threads per row, their
// partial sums added by a tree in workgroup memory (after matvec.wgsl).

var<workgroup> tile_partial: array<f32, WG * TILE>;

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
    let row = wg.x + wg.y * p.row_groups;
    let t0 = wg.z * TILE;
    let n = min(TILE, p.tokens - t0);
    let acc = partial_sums(row, t0, n, lid.x, WG);
    for (var i = 0u; i < n; i++) {
        tile_partial[i * WG + lid.x] = acc[i];
    }
    workgroupBarrier();
    for (var s = WG / 2u; s > 0u; s >>= 1u) {
        if (lid.x < s) {
            for (var i = 0u; i < n; i++) {
                tile_partial[i * WG + lid.x] += tile_partial[i * WG + lid.x + s];
            }
        }
        workgroupBarrier();
    }
    // Thread i writes token i's sum.
    if (lid.x < n && row < p.rows) {
        y[(t0 + lid.x) * p.out_rows + p.first_row + row] = tile_partial[lid.x * WG];
    }
}
