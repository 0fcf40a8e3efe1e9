// Q6_K's `block_dot` for matvec.wgsl on the f16 path (after q6_k.wgsl and
// matvec_f16.wgsl): a sub-block against activations from activations_f16.wgsl (scaled into
// (-1, 1) by 2^-e per 32 values). The values (q − 32, in [-32, 31]) and the scaled
// activations meet in f16 four at a time (|term| < 32: no overflow), and the four-term
// sums are added in f32.

fn block_dot(block: u32, xo: u32) -> f32 {
    let s = q6k_sub(block);
    var s0 = 0.0;
    var s1 = 0.0;
    for (var i = 0u; i < 8u; i++) {
        let t = f32(dot(bytes_f16(q6k_word(s, i)) - vec4<f16>(32.0), x4_f16(xo + 4u * i)));
        if (i < 4u) {
            s0 += t;
        } else {
            s1 += t;
        }
    }
    return x_scale(xo) * q6k_dot(s.d_scale0, s.d_scale1, s0, s1);
}
