// The matrix product's entry point without subgroup operations: 64 threads per row, their
// partial sums added by a tree in workgroup memory (after matvec.wgsl).

var<workgroup> tile_partial: array<f32, WG * TILE>;
var<workgroup> gate_sums: array<f32, TILE>;

// Each token's sum of the workgroup's partial sums `acc`, left at tile_partial[i · WG].
fn tree_sums(acc: array<f32, TILE>, n: u32, lane: u32) {
    var a = acc;
    for (var i = 0u; i < n; i++) {
        tile_partial[i * WG + lane] = a[i];
    }
    workgroupBarrier();
    for (var s = WG / 2u; s > 0u; s >>= 1u) {
        if (lane < s) {
            for (var i = 0u; i < n; i++) {
                tile_partial[i * WG + lane] += tile_partial[i * WG + lane + s];
            }
        }
        workgroupBarrier();
    }
}

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
    let row = wg.x + wg.y * p.row_groups;
    let t0 = wg.z * TILE;
    let n = min(TILE, p.tokens - t0);
    let valid = row < p.rows;
    // With MODE_GLU the gate row's sums first, kept aside, then the up row's.
    if (p.mode == MODE_GLU) {
        tree_sums(partial_sums(row, valid, t0, n, lid.x, WG), n, lid.x);
        if (lid.x < n) {
            gate_sums[lid.x] = tile_partial[lid.x * WG];
        }
        workgroupBarrier();
        tree_sums(partial_sums(row + p.half, valid, t0, n, lid.x, WG), n, lid.x);
        if (lid.x < n && valid) {
            store(t0 + lid.x, row, gate_sums[lid.x], tile_partial[lid.x * WG]);
        }
        return;
    }
    tree_sums(partial_sums(row, valid, t0, n, lid.x, WG), n, lid.x);
    // Thread i writes token i's sum.
    if (lid.x < n && valid) {
        store(t0 + lid.x, row, tile_partial[lid.x * WG], 0.0);
    }
}
