// Activations to 8-bit blocks of 32, as the CPU backend (and llama.cpp) quantizes them
// before a Q4_1 or Q8_0 product: d = amax / 127, q = round-half-even(x · 127 / amax),
// d kept at f16 precision, and s = d · Σq (for Q4_1's minimum term) likewise. One thread
// per block. Output: the q values as floats at [0, n), then (d, s) per block at [n, n +
// n / 16).

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
    let o = b * 32u;
    var amax = 0.0;
    for (var j = 0u; j < 32u; j++) {
        amax = max(amax, abs(x[o + j]));
    }
    let d = amax / 127.0;
    var id = 0.0;
    if (amax != 0.0) {
        id = 127.0 / amax;
    }
    var sum = 0.0;
    for (var j = 0u; j < 32u; j++) {
        let r = round(x[o + j] * id);
        q[o + j] = r;
        sum += r;
    }
    q[p.n + 2u * b] = f16_round(d);
    q[p.n + 2u * b + 1u] = f16_round(d * sum);
}
