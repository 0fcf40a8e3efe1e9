// x[r] = (x[r] − mean) / sqrt(var + eps) · gamma + beta, in place, one workgroup per row
// (reduce.wgsl is prepended): the BERT encoder's LayerNorm. The variance is taken over the
// centred values in a second pass, as the CPU's `layer_norm` does (not E[x²] − mean²,
// which cancels badly for rows far from zero).

struct Params {
    n: u32,
    rows: u32,
    eps: f32,
    _pad0: u32,
}

@group(0) @binding(0) var<storage, read_write> x: array<f32>;
@group(0) @binding(1) var<storage, read> gamma: array<f32>;
@group(0) @binding(2) var<storage, read> beta: array<f32>;
@group(0) @binding(3) var<uniform> p: Params;

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
    let o = wg.x * p.n;
    var s = 0.0;
    for (var i = lid.x; i < p.n; i += WG) {
        s += x[o + i];
    }
    let mean = workgroup_sum(lid.x, s) / f32(p.n);
    var ss = 0.0;
    for (var i = lid.x; i < p.n; i += WG) {
        let d = x[o + i] - mean;
        ss += d * d;
    }
    let inv = 1.0 / sqrt(workgroup_sum(lid.x, ss) / f32(p.n) + p.eps);
    // Each thread writes only the values it read: no other thread reads them after.
    for (var i = lid.x; i < p.n; i += WG) {
        x[o + i] = (x[o + i] - mean) * inv * gamma[i] + beta[i];
    }
}
