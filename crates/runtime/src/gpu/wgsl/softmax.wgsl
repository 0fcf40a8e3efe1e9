// In place, one workgroup per row: x[r] = softmax(scale · x[r]), the maximum subtracted
// first (reduce.wgsl is prepended).

struct Params {
    n: u32,
    rows: u32,
    scale: f32,
    _pad0: u32,
}

@group(0) @binding(0) var<storage, read_write> x: array<f32>;
@group(0) @binding(1) var<uniform> p: Params;

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
    let o = wg.x * p.n;
    var m = bitcast<f32>(0xff7fffffu); // -FLT_MAX, exactly (Tint refuses the decimal literal rounded past it)
    for (var i = lid.x; i < p.n; i += WG) {
        m = max(m, x[o + i] * p.scale);
    }
    let top = workgroup_max(lid.x, m);
    var sum = 0.0;
    for (var i = lid.x; i < p.n; i += WG) {
        let e = exp(x[o + i] * p.scale - top);
        x[o + i] = e;
        sum += e;
    }
    let inv = 1.0 / workgroup_sum(lid.x, sum);
    for (var i = lid.x; i < p.n; i += WG) {
        x[o + i] *= inv;
    }
}
