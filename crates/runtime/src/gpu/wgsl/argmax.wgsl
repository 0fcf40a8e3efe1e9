// Greedy decoding's pick on the GPU, so that 4 bytes come back per token instead of the
// logits: for each row of `width` values, the index of its largest value (the first of
// equal ones, as the CPU picks), written as the index's bits into an f32 slot. 256 threads a
// row: a row is a whole vocabulary (151,936 logits for Qwen2.5), and with 64 threads each
// thread's scan was most of a millisecond on an H100.

struct Params {
    width: u32,
    rows: u32,
    _pad0: u32,
    _pad1: u32,
}

@group(0) @binding(0) var<storage, read> x: array<f32>;
@group(0) @binding(1) var<storage, read_write> out: array<f32>;
@group(0) @binding(2) var<uniform> p: Params;

const NONE: u32 = 0xffffffffu;
const WGA: u32 = 256u;
var<workgroup> best_value: array<f32, 256>;
var<workgroup> best_index: array<u32, 256>;

// Whether (v, i) goes before (bv, bi): larger, or equal and earlier; nothing beats a
// real entry.
fn better(v: f32, i: u32, bv: f32, bi: u32) -> bool {
    return i != NONE && (bi == NONE || v > bv || (v == bv && i < bi));
}

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
    let base = wg.x * p.width;
    var v = 0.0;
    var idx = NONE;
    for (var i = lid.x; i < p.width; i += WGA) {
        if (better(x[base + i], i, v, idx)) {
            v = x[base + i];
            idx = i;
        }
    }
    best_value[lid.x] = v;
    best_index[lid.x] = idx;
    workgroupBarrier();
    for (var s = WGA / 2u; s > 0u; s >>= 1u) {
        if (lid.x < s && better(best_value[lid.x + s], best_index[lid.x + s], best_value[lid.x], best_index[lid.x])) {
            best_value[lid.x] = best_value[lid.x + s];
            best_index[lid.x] = best_index[lid.x + s];
        }
        workgroupBarrier();
    }
    if (lid.x == 0u) {
        out[wg.x] = bitcast<f32>(best_index[0]);
    }
}
