// Append `tokens` rows of keys or values to a layer's cache at position `n_past`, as f16
// pairs packed in u32 words (half the memory and reads of f32; packed with integer
// operations, f16.wgsl, so no `shader-f16` is needed), rounded as the CPU backend (and
// llama.cpp, whose cache is f16) rounds them. Rows have an even width (heads × an even head_dim).

struct Params {
    width: u32,  // values per row (kv heads × head_dim)
    tokens: u32,
    n_past: u32,
    first: u32,  // the first row of `src` to store (a batch holds several sequences' rows)
}

@group(0) @binding(0) var<storage, read> src: array<f32>;
@group(0) @binding(1) var<storage, read_write> cache: array<u32>;
@group(0) @binding(2) var<uniform> p: Params;

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
    let pair = gid.x + gid.y * 65535u * 64u;
    if (pair >= p.width * p.tokens / 2u) {
        return;
    }
    let at = p.first * p.width + 2u * pair;
    cache[p.n_past * p.width / 2u + pair] = pack_f16(src[at], src[at + 1u]);
}
