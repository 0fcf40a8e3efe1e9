// y[t, first_row + r] = W[r] · x[t] for one part of a matrix (rows split across buffers
// when larger than a binding): one workgroup per row and tile of up to TILE tokens, its 64
// threads taking blocks in turn (each block against every token of the tile), then one
// tree sum per token. The block format's file, prepended, defines `BLOCK_VALUES` and
// `block_dot(block, xo)`: block `block` (an index over the part's blocks) against
// x[xo .. xo + BLOCK_VALUES] (the activations as f32, or quantized by quantize_q8.wgsl, as
// the format's CPU kernel reads them).
//
// Why tiles: a prompt of n tokens used to be n matrix × vector products, each reading
// the whole matrix from memory; a workgroup now takes each of a row's blocks for up to
// TILE tokens in a row, so the block comes from memory once and from cache after (prefill
// is memory-bound on a GPU). `block_dot` still decodes the block once per token. Each (row, token) is summed in the same order as
// with a tile of one (thread lid takes blocks lid, lid + 64, …; then the same tree), so
// a token's result does not depend on the prompt's length or its place in a tile.

struct Params {
    rows: u32,       // rows in this part
    blocks: u32,     // blocks per row
    cols: u32,       // values per row (x's row length)
    out_rows: u32,   // rows of the whole matrix (y's row length)
    first_row: u32,  // this part's first row in the whole matrix
    row_groups: u32, // workgroups along x (rows past 65535 continue along y)
    scales_at: u32,  // quantized activations: where their (d, s) pairs start in x
    tokens: u32,     // activation rows (tokens)
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

const TILE: u32 = 8u;
var<workgroup> tile_partial: array<f32, WG * TILE>;

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
    let row = wg.x + wg.y * p.row_groups;
    let t0 = wg.z * TILE;
    let n = min(TILE, p.tokens - t0);
    var acc: array<f32, TILE>;
    if (row < p.rows) {
        for (var b = lid.x; b < p.blocks; b += WG) {
            let block = row * p.blocks + b;
            for (var i = 0u; i < n; i++) {
                acc[i] += block_dot(block, (t0 + i) * p.cols + b * BLOCK_VALUES);
            }
        }
    }
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
