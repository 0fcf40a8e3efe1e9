// The tiled product's tiles on the f32 path (matmul.wgsl): a sub-block's 32 values of BM
// rows, `w_tile[k · BM + r]` (the format stages them), and of BN tokens' activations,
// `x_tile[k · BN + t]`, zeros past the last token.

var<workgroup> w_tile: array<f32, 32 * BM>;
var<workgroup> x_tile: array<f32, 32 * BN>;

fn stage_inputs(b: u32, t0: u32, lane: u32) {
    // Four threads a token, eight values each.
    let t = lane / 4u;
    let part = lane % 4u;
    let valid = t0 + t < p.tokens;
    let xo = (t0 + t) * p.cols + 32u * b + 8u * part;
    for (var k = 0u; k < 8u; k++) {
        var v = 0.0;
        if (valid) {
            v = x[xo + k];
        }
        x_tile[(8u * part + k) * BN + t] = v;
    }
}
