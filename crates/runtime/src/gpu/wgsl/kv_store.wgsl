// Append `tokens` rows of keys or values to a layer's cache at position `n_past`, rounded
// to f16 precision as the CPU backend (and llama.cpp, whose cache is f16) keeps them.

struct Params {
    width: u32,  // floats per row (kv heads × head_dim)
    tokens: u32,
    n_past: u32,
    _pad0: u32,
}

@group(0) @binding(0) var<storage, read> src: array<f32>;
@group(0) @binding(1) var<storage, read_write> cache: array<f32>;
@group(0) @binding(2) var<uniform> p: Params;

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
    let i = gid.x + gid.y * 65535u * 64u;
    if (i >= p.width * p.tokens) {
        return;
    }
    cache[p.n_past * p.width + i] = unpack2x16float(pack2x16float(vec2<f32>(src[i], 0.0))).x;
}
