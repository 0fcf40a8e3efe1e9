// Activations for the f16 path (adapters with `shader-f16`): each block of 32 values
// scaled by a power of two into (-1, 1) and packed as f16 (`f16_block`, blocks.wgsl; SmolLM2
// and Qwen grow activations past 20,000, and f16 ends at 65,504). A power of two scales
// exactly, so the only rounding is to f16 (to nearest: 11 significant bits, where the 8-bit
// path keeps 8). Output as f16 halves: the scaled values at [0, n), then block b's exponent
// e at half n + 2b (a word each, the upper half zero, so no two threads write one word).
// One thread per block. Needs no f16 arithmetic itself (it writes packed words).

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
    var vals: array<f32, 32>;
    for (var j = 0u; j < 32u; j++) {
        vals[j] = x[32u * b + j];
    }
    let block = f16_block(vals);
    for (var j = 0u; j < 16u; j++) {
        h[16u * b + j] = block.words[j];
    }
    h[p.n / 2u + b] = block.exponent;
}
