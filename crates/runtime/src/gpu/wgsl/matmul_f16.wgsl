// The tiled product's tiles on the f16 path (matmul.wgsl, after matvec_f16.wgsl): a
// sub-block's 32 values as f16 fours of BM rows, `w_tile[k4 · BM + r]` (the format stages
// them), and of BN tokens' activations, `x_tile[k4 · BN + t]`, with each token's 2^e for
// the block (`x_scales`), zeros past the last token.

var<workgroup> w_tile: array<vec4<f16>, 8 * BM>;
var<workgroup> x_tile: array<vec4<f16>, 8 * BN>;
var<workgroup> x_scales: array<f32, BN>;

fn stage_inputs(b: u32, t0: u32, lane: u32) {
    // Four threads a token, two fours each.
    let t = lane / 4u;
    let part = lane % 4u;
    let valid = t0 + t < p.tokens;
    let xo = (t0 + t) * p.cols + 32u * b;
    for (var k = 0u; k < 2u; k++) {
        var v = vec4<f16>(0.0);
        if (valid) {
            v = x4_f16(xo + 4u * (2u * part + k));
        }
        x_tile[(2u * part + k) * BN + t] = v;
    }
    if (part == 0u) {
        var s = 0.0;
        if (valid) {
            s = x_scale(xo);
        }
        x_scales[t] = s;
    }
}
