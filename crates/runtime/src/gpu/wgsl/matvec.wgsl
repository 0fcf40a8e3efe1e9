// y[t, first_row + r] = W[r] · x[t] for one part of a matrix (rows split across buffers
// when larger than a binding): one workgroup per row and token, its 64 threads taking
// blocks in turn, then a tree sum. The block format's file, prepended, defines
// `BLOCK_VALUES` and `block_dot(block, xo)`: block `block` (an index over the part's
// blocks) against x[xo .. xo + BLOCK_VALUES] (the activations as f32, or quantized by
// quantize_q8.wgsl, as the format's CPU kernel reads them).

struct Params {
    rows: u32,       // rows in this part
    blocks: u32,     // blocks per row
    cols: u32,       // values per row (x's row length)
    out_rows: u32,   // rows of the whole matrix (y's row length)
    first_row: u32,  // this part's first row in the whole matrix
    row_groups: u32, // workgroups along x (rows past 65535 continue along y)
    scales_at: u32,  // quantized activations: where their (d, s) pairs start in x
    _pad1: u32,
}

@group(0) @binding(0) var<storage, read> w: array<u32>;
@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read_write> y: array<f32>;
@group(0) @binding(3) var<uniform> p: Params;

// Byte `i` of the weights counted from word `base` (the K-quant formats' packed scales
// and values).
fn weight_byte(base: u32, i: u32) -> u32 {
    return (w[base + i / 4u] >> (8u * (i % 4u))) & 0xFFu;
}

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
    let row = wg.x + wg.y * p.row_groups;
    let t = wg.z;
    var acc = 0.0;
    if (row < p.rows) {
        for (var b = lid.x; b < p.blocks; b += WG) {
            acc += block_dot(row * p.blocks + b, t * p.cols + b * BLOCK_VALUES);
        }
    }
    let total = workgroup_sum(lid.x, acc);
    if (lid.x == 0u && row < p.rows) {
        y[t * p.out_rows + p.first_row + row] = total;
    }
}
