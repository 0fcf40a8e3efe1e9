// y[t, first_row + r] = W[r] · x[t] for one part of a matrix (rows split across buffers
// when larger than a binding), for a few tokens (a decode step; matmul.wgsl takes prompts):
// one workgroup per row and tile of up to `p.tile` tokens. After product_io.wgsl and a
// block format's file, which defines `block_dot(block, xo)`: sub-block `block` (an index
// over w's 32-value sub-blocks) against activations xo .. xo + 32 (as f32, or quantized by
// quantize_q8.wgsl, as the format's CPU kernel reads them; on the f16 path, words from
// activations_f16.wgsl, with matvec_f16.wgsl prepended). The Rust side declares `XWord`,
// the activations' element.
//
// The 64 threads take a row's sub-blocks in turn (each against every token of the tile),
// leaving each dot product in workgroup memory; then a thread per (token, 256 values) adds
// its eight in order, and a thread per token adds those in order (product_io.wgsl: the
// order both kernels keep). A tile reads each block from memory once and from cache for
// its other tokens.

const WG: u32 = 64u;
// Sub-block dot products held at once: a tile's tokens × a row's sub-blocks (kernels.rs
// sizes the tile to fit: MATVEC_SUMS).
const SUMS: u32 = 3072u;

var<workgroup> sums: array<f32, SUMS>;

// Row `row`'s sum for token t0 + lane (lane < n) in the fixed order; 0 for other lanes.
// Every thread calls it, in uniform control flow.
fn row_sum(row: u32, valid: bool, t0: u32, n: u32, lane: u32) -> f32 {
    let first = row_start(row);
    if (valid) {
        for (var b = lane; b < p.blocks; b += WG) {
            for (var i = 0u; i < n; i++) {
                sums[i * p.blocks + b] = rounded(block_dot(first + b, (t0 + i) * p.cols + b * 32u));
            }
        }
    }
    workgroupBarrier();
    // Each 256 values' sum, left at its first sub-block's place.
    let groups = (p.blocks + 7u) / 8u;
    for (var j = lane; j < n * groups; j += WG) {
        let at = (j / groups) * p.blocks + 8u * (j % groups);
        let end = at + min(8u, p.blocks - 8u * (j % groups));
        var s = 0.0;
        for (var b = at; b < end; b++) {
            s += sums[b];
        }
        sums[at] = s;
    }
    workgroupBarrier();
    var total = 0.0;
    if (lane < n) {
        for (var g = 0u; g < groups; g++) {
            total += sums[lane * p.blocks + 8u * g];
        }
    }
    // The next call writes `sums` again.
    workgroupBarrier();
    return total;
}

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
    let row = wg.x + wg.y * p.row_groups;
    let t0 = wg.z * p.tile;
    let n = min(p.tile, p.tokens - t0);
    let valid = row < p.rows;
    let sum = row_sum(row, valid, t0, n, lid.x);
    // With MODE_GLU the up row's sum too (p.mode is uniform: every thread sums).
    var up = 0.0;
    if (p.mode == MODE_GLU) {
        up = row_sum(row + p.half, valid, t0, n, lid.x);
    }
    if (lid.x < n && valid) {
        store(t0 + lid.x, row, sum, up);
    }
}
