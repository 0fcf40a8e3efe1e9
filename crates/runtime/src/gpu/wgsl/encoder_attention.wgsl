// Bidirectional attention of one sequence, as the BERT encoder computes it: for each of
// the sequence's tokens i and heads h, ctx[i, h] = Σ_j softmax_j(q_i·k_j · scale) · v_j,
// over every token j of the same sequence (no mask: sequences are packed end to end, never
// padded, and a sequence attends to itself alone; see embed/encoder.rs). reduce.wgsl is
// prepended. One workgroup per (token, head); qkv holds each token's row as q | k | v
// (`3 · hidden` values, heads side by side within each), ctx each token's `hidden` values.

struct Params {
    first: u32,    // the sequence's first token in the packed rows
    tokens: u32,   // its length (at most MAX_TOKENS)
    hidden: u32,   // heads × head_dim
    head_dim: u32,
    heads: u32,
    scale: f32,
    _pad0: u32,
    _pad1: u32,
}

@group(0) @binding(0) var<storage, read> qkv: array<f32>;
@group(0) @binding(1) var<storage, read_write> ctx: array<f32>;
@group(0) @binding(2) var<uniform> p: Params;

// The longest sequence (encoder_attention in kernels.rs refuses longer ones).
const MAX_TOKENS: u32 = 1024u;
var<workgroup> weights: array<f32, MAX_TOKENS>;

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
    let i = wg.x;
    let head = wg.y;
    let row = 3u * p.hidden;
    let q = (p.first + i) * row + head * p.head_dim;
    var top = -3.4e38;
    for (var j = lid.x; j < p.tokens; j += WG) {
        let k = (p.first + j) * row + p.hidden + head * p.head_dim;
        var s = 0.0;
        for (var d = 0u; d < p.head_dim; d++) {
            s += qkv[q + d] * qkv[k + d];
        }
        s *= p.scale;
        weights[j] = s;
        top = max(top, s);
    }
    let m = workgroup_max(lid.x, top);
    var sum = 0.0;
    for (var j = lid.x; j < p.tokens; j += WG) {
        let e = exp(weights[j] - m);
        weights[j] = e;
        sum += e;
    }
    let inv = 1.0 / workgroup_sum(lid.x, sum);
    // workgroup_sum ended with a barrier: every weight is written.
    for (var d = lid.x; d < p.head_dim; d += WG) {
        var acc = 0.0;
        for (var j = 0u; j < p.tokens; j++) {
            acc += weights[j] * qkv[(p.first + j) * row + 2u * p.hidden + head * p.head_dim + d];
        }
        ctx[(p.first + i) * p.hidden + head * p.head_dim + d] = acc * inv;
    }
}
