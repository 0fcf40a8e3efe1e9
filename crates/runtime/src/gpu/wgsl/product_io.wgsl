// What the two matrix kernels share (matvec.wgsl for a few tokens, matmul.wgsl for many;
// before a block format's pieces): parameters, buffers, and where a row's sum goes.
//
// A product can take two matrices of two formats lying one after the other in w (a
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
// The order of a sum: both kernels add each (row, token)'s 32-value sub-block dot products
// (`block_dot`, or the same arithmetic on tiles) eight at a time in order, then those
// 256-value sums in order, from 0. So a token's row comes out the same whichever kernel
// took it and whatever else was in its batch: how a prompt is cut into pieces, or whether
// a token is decoded alone, does not move a result (the kernel checks hold the kernels to
// the same bits). Multiply-adds are written as `fma` and each dot product goes through
// `rounded`, so a compiler has no contraction to make in one kernel and not another.
// Subgroup sums (`subgroupAdd`) add in an order of the adapter's choosing, so the kernels
// do not use them: a fixed order costs three barriers and a few adds a row.

struct Params {
    rows: u32,       // rows in this part (MODE_GLU: gate rows)
    blocks: u32,     // 32-value sub-blocks per row
    cols: u32,       // values per row (x's row length)
    out_rows: u32,   // rows of the whole matrix (y's row length)
    first_row: u32,  // this part's first row in the whole matrix
    row_groups: u32, // workgroups along x (rows past 65535 continue along y)
    scales_at: u32,  // quantized activations: where their (d, s) pairs start in x
    tokens: u32,     // activation rows (tokens)
    first_block: u32, // the matrix's first sub-block in w (a stacked matrix's place)
    mode: u32,       // MODE_STORE, MODE_ADD or MODE_GLU
    half: u32,       // MODE_GLU: rows from a gate row to its up row
    rows_first: u32, // a pair of formats: rows in the first (all rows otherwise)
    second_block: u32, // a pair of formats: the second matrix's first sub-block in w
    tile: u32,       // matvec.wgsl: tokens per workgroup
    zero: u32,       // 0 (`rounded`)
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

// The first sub-block of row `row` (of this part), and whether it is the second format's.
fn row_start(row: u32) -> u32 {
    second_format = row >= p.rows_first;
    if (second_format) {
        return p.second_block + (row - p.rows_first) * p.blocks;
    }
    return p.first_block + row * p.blocks;
}

// `v` itself, through an integer operation with a value no compiler can know (`p.zero` is
// 0): each sub-block's dot product is rounded to f32 here before it joins a sum. Without it
// a compiler may fold the dot product's last multiply-add into the sum's add (llvmpipe's
// does, a rounding less) in one kernel and not in another, and the kernels' results would
// differ by an ulp.
fn rounded(v: f32) -> f32 {
    return bitcast<f32>(bitcast<u32>(v) | p.zero);
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
