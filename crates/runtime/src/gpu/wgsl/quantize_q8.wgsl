// Activations to 8-bit blocks of 32 (`q8_block`, blocks.wgsl) before a Q4_1 or Q8_0
// product, as the CPU backend (and llama.cpp) quantizes them. One thread per block. Output:
// the q values as floats at [0, n), then (d, s) per block at [n, n + n / 16).

struct Params {
    n: u32,   // values (a multiple of 32)
    _pad0: u32,
    _pad1: u32,
    _pad2: u32,
}

@group(0) @binding(0) var<storage, read> x: array<f32>;
@group(0) @binding(1) var<storage, read_write> q: array<f32>;
@group(0) @binding(2) var<uniform> p: Params;

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
    let b = gid.x + gid.y * 65535u * 64u;
    if (b * 32u >= p.n) {
        return;
    }
    var vals: array<f32, 32>;
    for (var j = 0u; j < 32u; j++) {
        vals[j] = x[32u * b + j];
    }
    let block = q8_block(vals);
    for (var j = 0u; j < 32u; j++) {
        q[32u * b + j] = block.q[j];
    }
    q[p.n + 2u * b] = block.d;
    q[p.n + 2u * b + 1u] = block.s;
}
