// The repetition penalty, in place on one row of logits before sampling: each listed token
// (recent ones, without repeats) has a positive logit divided by the penalty and a
// negative one multiplied, as the CPU sampler does.

struct Params {
    count: u32,
    width: u32,
    penalty: f32,
    _pad: u32,
}

@group(0) @binding(0) var<storage, read_write> x: array<f32>;
@group(0) @binding(1) var<storage, read> ids: array<u32>;
@group(0) @binding(2) var<uniform> p: Params;

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
    if (gid.x >= p.count) {
        return;
    }
    let id = ids[gid.x];
    if (id < p.width) {
        let v = x[id];
        x[id] = select(v * p.penalty, v / p.penalty, v > 0.0);
    }
}
