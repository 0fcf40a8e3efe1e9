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

// Σ w·x over fours k0 .. k1 of the sub-block for the thread's rows (ty + 16i) and tokens
// (tx + 8j): each four in f16 (`dot`), added in f32 in order (the formats' `block_dot`
// sums so).
fn tile_sums(k0: u32, k1: u32, ty: u32, tx: u32) -> array<f32, 16> {
    var s: array<f32, 16>;
    for (var k = k0; k < k1; k++) {
        var xv: array<vec4<f16>, 4>;
        for (var j = 0u; j < 4u; j++) {
            xv[j] = x_tile[k * BN + tx + 8u * j];
        }
        for (var i = 0u; i < 4u; i++) {
            let wv = w_tile[k * BM + ty + 16u * i];
            for (var j = 0u; j < 4u; j++) {
                s[4u * i + j] += f32(dot(wv, xv[j]));
            }
        }
    }
    return s;
}

// Σx over the sub-block for each of the thread's tokens, as the K-quants' `block_dot` adds
// it (pairs in f16, then f32).
fn tile_input_sums(tx: u32) -> array<f32, 4> {
    var s: array<f32, 4>;
    for (var k = 0u; k < 8u; k++) {
        for (var j = 0u; j < 4u; j++) {
            let xv = x_tile[k * BN + tx + 8u * j];
            s[j] += f32(xv.x + xv.y) + f32(xv.z + xv.w);
        }
    }
    return s;
}
