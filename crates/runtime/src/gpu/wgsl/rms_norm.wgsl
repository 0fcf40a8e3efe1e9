// y[r] = x[r] / sqrt(mean(x[r]²) + eps) · weight, one workgroup per row (reduce.wgsl is
// prepended).

struct Params {
    n: u32,
    rows: u32,
    eps: f32,
    _pad0: u32,
}

@group(0) @binding(0) var<storage, read> x: array<f32>;
@group(0) @binding(1) var<storage, read> weight: array<f32>;
@group(0) @binding(2) var<storage, read_write> y: array<f32>;
@group(0) @binding(3) var<uniform> p: Params;

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
    let o = wg.x * p.n;
    var ss = 0.0;
    for (var i = lid.x; i < p.n; i += WG) {
        ss += x[o + i] * x[o + i];
    }
    let scale = 1.0 / sqrt(workgroup_sum(lid.x, ss) / f32(p.n) + p.eps);
    for (var i = lid.x; i < p.n; i += WG) {
        y[o + i] = x[o + i] * scale * weight[i];
    }
}
