// Activations for the f16 path (adapters with `shader-f16`): each block of 32 values is
// scaled by a power of two, 2^-e with 2^e just above its largest magnitude, so every value
// lies in (-1, 1) and no product with a K-quant's small integers can overflow f16 (SmolLM2
// and Qwen grow activations past 20,000, and f16 ends at 65,504). A power of two scales
// exactly, so the only rounding is to f16 (to nearest: 11 significant bits, where the 8-bit
// path keeps 8). Output as f16 halves: the scaled values at [0, n), then block b's exponent
// e at half n + 2b (a word each, the upper half zero, so no two threads write one word).
// One thread per block. Needs no f16 arithmetic itself (it writes packed words; f16.wgsl
// is prepended).

struct Params {
    n: u32,   // values (a multiple of 32)
    _pad0: u32,
    _pad1: u32,
    _pad2: u32,
}

@group(0) @binding(0) var<storage, read> x: array<f32>;
@group(0) @binding(1) var<storage, read_write> h: array<u32>;
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
    // amax = fract · 2^e with fract in [0.5, 1): |x| · 2^-e < 1 (e = 0 for a block of zeros).
    // ldexp per value, not a factor 2^-e (which overflows for a block of subnormals).
    let e = frexp(amax).exp;
    for (var j = 0u; j < 16u; j++) {
        h[o / 2u + j] = pack_f16(ldexp(x[o + 2u * j], -e), ldexp(x[o + 2u * j + 1u], -e));
    }
    h[p.n / 2u + b] = pack_f16(f32(e), 0.0);
}
