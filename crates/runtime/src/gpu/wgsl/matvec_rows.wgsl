// The matrix × vector kernel's shape for CPU adapters (llvmpipe, SwiftShader), in place of
// matvec.wgsl's: one row an invocation, 64 rows a workgroup, each row's sub-blocks taken in
// order for each token of the tile (up to TILE). Such an adapter runs a workgroup's
// invocations as SIMD lanes of one CPU thread, where a barrier costs a switch between
// lanes' batches: this shape has none, and its lanes read the same activations. A GPU
// wants many threads on a row instead (matvec.wgsl). The sums are the ones product_io.wgsl
// fixes, so both shapes give the same bits.

const TILE: u32 = 8u;

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
    let row = (wg.x + wg.y * p.row_groups) * 64u + lid.x;
    let t0 = wg.z * p.tile;
    let n = min(p.tile, p.tokens - t0);
    if (row >= p.rows) {
        return;
    }
    var sum: array<f32, TILE>;
    var up: array<f32, TILE>;
    sum = row_sums(row, t0, n);
    if (p.mode == MODE_GLU) {
        up = row_sums(row + p.half, t0, n);
    }
    for (var i = 0u; i < n; i++) {
        store(t0 + i, row, sum[i], up[i]);
    }
}

// Row `row`'s sums for tokens t0 .. t0 + n in the fixed order.
fn row_sums(row: u32, t0: u32, n: u32) -> array<f32, TILE> {
    let first = row_start(row);
    var total: array<f32, TILE>;
    var group: array<f32, TILE>;
    for (var b = 0u; b < p.blocks; b++) {
        for (var i = 0u; i < n; i++) {
            group[i] += rounded(block_dot(first + b, (t0 + i) * p.cols + b * 32u));
        }
        if (b % 8u == 7u || b + 1u == p.blocks) {
            for (var i = 0u; i < n; i++) {
                total[i] += group[i];
                group[i] = 0.0;
            }
        }
    }
    return total;
}
