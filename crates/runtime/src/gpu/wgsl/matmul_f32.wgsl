// The tiled product's tiles on the f32 path (matmul.wgsl): a sub-block's 32 values of BM
// rows, `w_tile[k · BM + r]` (the format stages them), and of BN tokens' activations,
// `x_tile[k · BN + t]`, zeros past the last token. For the formats that read 8-bit
// activations (the format's piece sets READS_Q8: Q4_0 to Q8_0), those are quantize_q8.wgsl's
// q values, and each token's (d, s) for the block goes to `x_q8`.

var<workgroup> w_tile: array<f32, 32 * BM>;
var<workgroup> x_tile: array<f32, 32 * BN>;
var<workgroup> x_q8: array<vec2<f32>, BN>;

fn stage_inputs(b: u32, t0: u32, lane: u32) {
    // Four threads a token, eight values each.
    let t = lane / 4u;
    let part = lane % 4u;
    let valid = t0 + t < p.tokens;
    let xo = (t0 + t) * p.cols + 32u * b;
    for (var k = 0u; k < 8u; k++) {
        var v = 0.0;
        if (valid) {
            v = x[xo + 8u * part + k];
        }
        x_tile[(8u * part + k) * BN + t] = v;
    }
    if (READS_Q8 && part == 0u) {
        var ds = vec2<f32>(0.0);
        if (valid) {
            let s = p.scales_at + 2u * (xo / 32u);
            ds = vec2<f32>(x[s], x[s + 1u]);
        }
        x_q8[t] = ds;
    }
}

// Σ w·x over values k0 .. k1 of the sub-block for the thread's rows (ty + 16i) and tokens
// (tx + 8j), in order, as `fma` (the formats' `block_dot` sums so).
fn tile_sums(k0: u32, k1: u32, ty: u32, tx: u32) -> array<f32, 16> {
    var s: array<f32, 16>;
    for (var k = k0; k < k1; k++) {
        var xv: array<f32, 4>;
        for (var j = 0u; j < 4u; j++) {
            xv[j] = x_tile[k * BN + tx + 8u * j];
        }
        for (var i = 0u; i < 4u; i++) {
            let wv = w_tile[k * BM + ty + 16u * i];
            for (var j = 0u; j < 4u; j++) {
                s[4u * i + j] = fma(wv, xv[j], s[4u * i + j]);
            }
        }
    }
    return s;
}

// Σx over the sub-block for each of the thread's tokens, in order.
fn tile_input_sums(tx: u32) -> array<f32, 4> {
    var s: array<f32, 4>;
    for (var k = 0u; k < 32u; k++) {
        for (var j = 0u; j < 4u; j++) {
            s[j] += x_tile[k * BN + tx + 8u * j];
        }
    }
    return s;
}

// The dot products of the formats that read 8-bit activations, from the staged rows' (d, m)
// and the tokens' (dx, s): d·dx·Σq·qx + m·s, as their `block_dot` gives them (Q8_0's m is
// 0, and fma(a, b, 0) is a·b). Σq·qx is a sum of integers, exact in f32 in any order
// (|Σ| < 2^24).
fn q8_dots(ty: u32, tx: u32) -> array<f32, 16> {
    let s = tile_sums(0u, 32u, ty, tx);
    var d: array<f32, 16>;
    for (var i = 0u; i < 4u; i++) {
        let m = w_meta[ty + 16u * i];
        for (var j = 0u; j < 4u; j++) {
            let xs = x_q8[tx + 8u * j];
            d[4u * i + j] = fma(m.x * xs.x, s[4u * i + j], m.y * xs.y);
        }
    }
    return d;
}
