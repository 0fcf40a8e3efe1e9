// SwiGLU for elementwise.wgsl: gate = silu(gate) · up, silu(g) = g / (1 + e^−g).

fn op(g: f32, up: f32) -> f32 {
    return g / (1.0 + exp(-g)) * up;
}
