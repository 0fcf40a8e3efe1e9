// The bias add and GELU of the encoder's feed-forward layer, for elementwise.wgsl:
// gelu(a + b) with gelu(v) = 0.5·v·(1 + erf(v/√2)), erf by Abramowitz & Stegun 7.1.26
// (absolute error below 1.5e-7), as the CPU's `gelu1` computes it (WGSL has no erf).

fn erf_as(v: f32) -> f32 {
    let a = min(abs(v), 6.0);
    let t = 1.0 / (1.0 + 0.3275911 * a);
    let poly = t * (0.2548296 + t * (-0.28449674 + t * (1.4214137 + t * (-1.453152 + t * 1.0614054))));
    return sign(v) * (1.0 - poly * exp(-a * a));
}

fn op(a: f32, b: f32) -> f32 {
    let v = a + b;
    return 0.5 * v * (1.0 + erf_as(v * 0.70710678));
}
