// GeGLU (gemma's feed-forward): gate = gelu(gate) · up, element by element, GELU read from
// the CPU's table of ggml's half-precision results (`cpu::mathfn::gelu_tanh_table`), indexed
// by the gate rounded to f16 (f16.wgsl, prepended): the same values as the CPU backend, bit
// for bit, where a shader's `tanh` would be specified only loosely. Gates at or below −10
// give 0, at or above 10 pass through, as ggml's. 64 elements a workgroup, workgroups past
// 65535 continuing along y.

struct Params {
    n: u32,
    _pad0: u32,
    _pad1: u32,
    _pad2: u32,
}

@group(0) @binding(0) var<storage, read_write> gate: array<f32>;
@group(0) @binding(1) var<storage, read> up: array<f32>;
@group(0) @binding(2) var<storage, read> table: array<f32>;
@group(0) @binding(3) var<uniform> p: Params;

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
    let i = gid.x + gid.y * 65535u * 64u;
    if (i >= p.n) {
        return;
    }
    let g = gate[i];
    var y = 0.0;
    if (g >= 10.0) {
        y = g * up[i];
    } else if (g > -10.0) {
        y = table[f16_bits(g)] * up[i];
    }
    gate[i] = y;
}
