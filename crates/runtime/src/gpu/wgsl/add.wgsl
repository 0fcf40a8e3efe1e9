// The residual add for elementwise.wgsl.

fn op(a: f32, b: f32) -> f32 {
    return a + b;
}
