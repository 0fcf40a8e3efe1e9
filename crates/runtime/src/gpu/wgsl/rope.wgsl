// Rotary position embedding in place: for token t, every head, pair i of the first
// 2·pairs dimensions is rotated by the angle whose (cos, sin) is cs[t·pairs + i] (the
// table is computed on the CPU by the same code as the CPU backend's). Adjacent pairs
// (2i, 2i+1), or halves (i, i + pairs) for NeoX. Fused as llama.cpp's compiled code is:
// x0·c − x1·s and x0·s + x1·c with one fma each.

struct Params {
    head_dim: u32,
    heads: u32,   // heads per token
    pairs: u32,
    neox: u32,
    tokens: u32,
    _pad0: u32,
    _pad1: u32,
    _pad2: u32,
}

@group(0) @binding(0) var<storage, read_write> x: array<f32>;
@group(0) @binding(1) var<storage, read> cs: array<vec2<f32>>;
@group(0) @binding(2) var<uniform> p: Params;

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
    let per_token = p.heads * p.pairs;
    let k = gid.x;
    if (k >= per_token * p.tokens) {
        return;
    }
    let t = k / per_token;
    let h = (k % per_token) / p.pairs;
    let i = k % p.pairs;
    var a = 2u * i;
    var b = 2u * i + 1u;
    if (p.neox != 0u) {
        a = i;
        b = i + p.pairs;
    }
    let o = (t * p.heads + h) * p.head_dim;
    let c = cs[t * p.pairs + i];
    let x0 = x[o + a];
    let x1 = x[o + b];
    x[o + a] = fma(x0, c.x, -(x1 * c.y));
    x[o + b] = fma(x0, c.y, x1 * c.x);
}
