// y[t, first_row + r] = W[r] · x[t] for one part of a matrix (rows split across buffers
// when larger than a binding): one workgroup per row and tile of up to TILE tokens, its
// threads taking blocks in turn (each block against every token of the tile), then one
// sum per token: a tree over 64 threads in workgroup memory (matvec_tree.wgsl), or, where
// the adapter has subgroups, one subgroup's `subgroupAdd` (matvec_subgroup.wgsl); one of
// the two follows this file. The block format's file, prepended, defines `BLOCK_VALUES` and
// `block_dot(block, xo)`: block `block` (an index over the part's blocks) against
// activations xo .. xo + BLOCK_VALUES (as f32, or quantized by quantize_q8.wgsl, as the
// format's CPU kernel reads them; on the f16 path, words from activations_f16.wgsl, with
// matvec_f16.wgsl prepended). The Rust side declares `XWord`, the activations' element.
//
// A kernel can also take two matrices of two formats lying one after the other in w (a
// Q4_K_M layer's Q4_K queries and keys and its Q6_K values): rows past `rows_first` are the
// second's, whose blocks start at `second_block`.
//
// Where the sums go (`mode`): stored (y = W·x), added to what y holds (the residual stream:
// y += W·x, the add a dispatch of its own before), or, for a gated feed-forward's stacked
// gate and up projections, row r and row r + half summed together and stored as
// silu(gate) · up (SwiGLU, the element-wise dispatch before). The weights of a matrix may
// start past the buffer's first block (`first_block`): a layer's projections that read the
// same input are stacked in one buffer (`GpuMatrix::stack`), so one dispatch covers them.
//
// Why tiles: a prompt of n tokens used to be n matrix × vector products, each reading
// the whole matrix from memory; a workgroup now takes each of a row's blocks for up to
// TILE tokens in a row, so the block comes from memory once and from cache after (prefill
// is memory-bound on a GPU). `block_dot` still decodes the block once per token. Each
// (row, token) is summed in the same order as with a tile of one (thread lid takes blocks
// lid, lid + threads, …; then the same sum), so a token's result does not depend on the
// prompt's length or its place in a tile.

struct Params {
    rows: u32,       // rows in this part
    blocks: u32,     // blocks per row
    cols: u32,       // values per row (x's row length)
    out_rows: u32,   // rows of the whole matrix (y's row length)
    first_row: u32,  // this part's first row in the whole matrix
    row_groups: u32, // workgroups along x (rows past 65535 continue along y)
    scales_at: u32,  // quantized activations: where their (d, s) pairs start in x
    tokens: u32,     // activation rows (tokens)
    first_block: u32, // the matrix's first block in w (a stacked matrix's place)
    mode: u32,       // MODE_STORE, MODE_ADD or MODE_GLU
    half: u32,       // MODE_GLU: rows from a gate row to its up row
    rows_first: u32, // a pair of formats: rows in the first (all rows otherwise)
    second_block: u32, // a pair of formats: the second matrix's first block in w
    _pad0: u32,
    _pad1: u32,
    _pad2: u32,
}

// Whether this invocation's row is the second matrix's, in a kernel for a pair of formats
// (kernels.rs joins two formats' `block_dot` behind one that asks this).
var<private> second_format: bool;

const MODE_STORE: u32 = 0u;
const MODE_ADD: u32 = 1u;
const MODE_GLU: u32 = 2u;

@group(0) @binding(0) var<storage, read> w: array<u32>;
@group(0) @binding(1) var<storage, read> x: array<XWord>; // f32, or words on the f16 path
@group(0) @binding(2) var<storage, read_write> y: array<f32>;
@group(0) @binding(3) var<uniform> p: Params;

// Byte `i` of the weights counted from word `base` (the K-quant formats' packed scales
// and values).
fn weight_byte(base: u32, i: u32) -> u32 {
    return (w[base + i / 4u] >> (8u * (i % 4u))) & 0xFFu;
}

// Tokens per workgroup (MATVEC_TILE in kernels.rs).
const TILE: u32 = 8u;

// The partial sums of thread `lane` of `threads` for row `row` (none unless `valid`) and
// the `n` tokens of the tile starting at `t0`: blocks lane, lane + threads, … (each against
// every token).
fn partial_sums(row: u32, valid: bool, t0: u32, n: u32, lane: u32, threads: u32) -> array<f32, TILE> {
    var acc: array<f32, TILE>;
    second_format = row >= p.rows_first;
    var first = p.first_block + row * p.blocks;
    if (second_format) {
        first = p.second_block + (row - p.rows_first) * p.blocks;
    }
    if (valid) {
        for (var b = lane; b < p.blocks; b += threads) {
            let block = first + b;
            for (var i = 0u; i < n; i++) {
                acc[i] += block_dot(block, (t0 + i) * p.cols + b * BLOCK_VALUES);
            }
        }
    }
    return acc;
}

// Row `row`'s sum for token `t` (and, with MODE_GLU, its up row's sum `up`) to y.
fn store(t: u32, row: u32, sum: f32, up: f32) {
    let at = t * p.out_rows + p.first_row + row;
    switch p.mode {
        case MODE_ADD: {
            y[at] = y[at] + sum;
        }
        case MODE_GLU: {
            y[at] = sum / (1.0 + exp(-sum)) * up;
        }
        default: {
            y[at] = sum;
        }
    }
}
