// y[r] = x[r] / sqrt(mean(x[r]²) + eps) · weight, one workgroup per row (reduce.wgsl,
// f16.wgsl, blocks.wgsl and copies.wgsl are prepended), with the copies the next matrix
// products read (`forms`: 8-bit, scaled f16, both or none) written in the same dispatch:
// a decoder's norm is followed by products that read its output in their own form, and a
// dispatch of its own for each copy cost a launch and a pass over the row. Each thread
// takes whole blocks of 32 values (normalizes, writes, then makes the block's copies), so
// the copies need nothing from another thread. The width is a multiple of 32 when copies
// are asked for (the host checks). Rows past a dispatch's 65,535 workgroups a dimension
// (a prompt's per-head norms) continue in the second dimension.

struct Params {
    n: u32,
    rows: u32,
    eps: f32,
    forms: u32, // COPY_Q8 | COPY_F16 (copies.wgsl), or 0
    x_row0: u32, // the first row of x to normalize (y's row 0): a decoder's head reads its last rows
    _pad0: u32,
    _pad1: u32,
    _pad2: u32,
}

@group(0) @binding(0) var<storage, read> x: array<f32>;
@group(0) @binding(1) var<storage, read> weight: array<f32>;
@group(0) @binding(2) var<storage, read_write> y: array<f32>;
@group(0) @binding(3) var<storage, read_write> copy_q8: array<f32>;
@group(0) @binding(4) var<storage, read_write> copy_f16: array<u32>;
@group(0) @binding(5) var<uniform> p: Params;

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
    let row = wg.x + 65535u * wg.y;
    if (row >= p.rows) {
        return;
    }
    let o = row * p.n;
    let xo = (p.x_row0 + row) * p.n;
    var ss = 0.0;
    for (var i = lid.x; i < p.n; i += WG) {
        ss += x[xo + i] * x[xo + i];
    }
    let scale = 1.0 / sqrt(workgroup_sum(lid.x, ss) / f32(p.n) + p.eps);
    if (p.forms == 0u) {
        for (var i = lid.x; i < p.n; i += WG) {
            y[o + i] = x[xo + i] * scale * weight[i];
        }
        return;
    }
    for (var b = lid.x; b < p.n / 32u; b += WG) {
        var vals: array<f32, 32>;
        for (var j = 0u; j < 32u; j++) {
            let i = 32u * b + j;
            vals[j] = x[xo + i] * scale * weight[i];
            y[o + i] = vals[j];
        }
        write_copies(p.forms, p.n * p.rows, o / 32u + b, vals);
    }
}
