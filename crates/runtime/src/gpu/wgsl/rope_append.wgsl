// What follows a layer's Q/K/V products, in one dispatch (f16.wgsl is prepended): each
// token's row of `qkv` holds q | k | v (the products write them side by side); each value
// gets its bias (qwen2), queries and keys their rotary position embedding, the queries go
// to `q_out` for attention and the keys and values are appended to the layer's cache as
// f16 pairs (the CPU backend's and llama.cpp's rounding). These were seven dispatches
// (three bias adds, two RoPEs, two cache writes), each a launch and a pass over the rows.
//
// One thread per pair of adjacent values of a row: a cache word packs two adjacent values,
// but NeoX's RoPE pairs dimension i with i + pairs, so each thread computes each of its two
// values from that value's own pair, read from `qkv` (never written here, so no thread
// waits on another). RoPE as rope.wgsl computes it (x0·c − x1·s and x0·s + x1·c, one fma
// each, the angle table from the CPU), the bias added first, as the CPU backend does.
// Dimensions past the first 2·pairs keep their values.

struct Params {
    head_dim: u32,
    heads: u32,
    kv_heads: u32,
    pairs: u32,     // rotated pairs per head
    neox: u32,
    tokens: u32,    // this sequence's new rows
    n_past: u32,    // rows its cache held before them
    first_row: u32, // its first row in the batch (qkv, q_out and the angle table)
    has_bias: u32,
    _pad0: u32,
    _pad1: u32,
    _pad2: u32,
}

@group(0) @binding(0) var<storage, read> qkv: array<f32>;
@group(0) @binding(1) var<storage, read> bias: array<f32>; // q | k | v biases (has_bias)
@group(0) @binding(2) var<storage, read> cs: array<vec2<f32>>;
@group(0) @binding(3) var<storage, read_write> q_out: array<f32>;
@group(0) @binding(4) var<storage, read_write> k_cache: array<u32>;
@group(0) @binding(5) var<storage, read_write> v_cache: array<u32>;
@group(0) @binding(6) var<uniform> p: Params;

// Column `c` of the row starting at `base`, with its bias.
fn value(base: u32, c: u32) -> f32 {
    var x = qkv[base + c];
    if (p.has_bias != 0u) {
        x += bias[c];
    }
    return x;
}

// Dimension `d` of the head whose first column is `o`, rotated by batch row `row`'s angles.
fn rotated(base: u32, o: u32, d: u32, row: u32) -> f32 {
    if (d >= 2u * p.pairs) {
        return value(base, o + d);
    }
    var i = d / 2u;
    var a = 2u * i;
    var first = (d & 1u) == 0u;
    if (p.neox != 0u) {
        i = d % p.pairs;
        a = i;
        first = d < p.pairs;
    }
    let b = select(a + 1u, a + p.pairs, p.neox != 0u);
    let c = cs[row * p.pairs + i];
    let x0 = value(base, o + a);
    let x1 = value(base, o + b);
    if (first) {
        return fma(x0, c.x, -(x1 * c.y));
    }
    return fma(x0, c.y, x1 * c.x);
}

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
    let qw = p.heads * p.head_dim;
    let kvw = p.kv_heads * p.head_dim;
    let width = qw + 2u * kvw;
    let per_row = width / 2u;
    let k = gid.x + gid.y * 65535u * 64u;
    if (k >= per_row * p.tokens) {
        return;
    }
    let t = k / per_row;
    let col = 2u * (k % per_row);
    let row = p.first_row + t;
    let base = row * width;
    let cache_word = (p.n_past + t) * kvw / 2u;
    if (col < qw) {
        let o = col - col % p.head_dim;
        let d = col % p.head_dim;
        q_out[row * qw + col] = rotated(base, o, d, row);
        q_out[row * qw + col + 1u] = rotated(base, o, d + 1u, row);
    } else if (col < qw + kvw) {
        let c = col - qw;
        let o = qw + c - c % p.head_dim;
        let d = c % p.head_dim;
        k_cache[cache_word + c / 2u] = pack_f16(rotated(base, o, d, row), rotated(base, o, d + 1u, row));
    } else {
        let c = col - qw - kvw;
        v_cache[cache_word + c / 2u] = pack_f16(value(base, qw + kvw + c), value(base, qw + kvw + c + 1u));
    }
}
