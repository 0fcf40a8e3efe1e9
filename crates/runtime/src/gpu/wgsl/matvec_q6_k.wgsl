// Q6_K's `block_dot` for matvec.wgsl on the f32 path (after q6_k.wgsl): a sub-block
// against f32 activations, values in order (multiply-adds as `fma`: q4k_dot says why).

fn block_dot(block: u32, xo: u32) -> f32 {
    let s = q6k_sub(block);
    var s0 = 0.0;
    var s1 = 0.0;
    for (var i = 0u; i < 8u; i++) {
        let q = q6k_word(s, i);
        for (var k = 0u; k < 4u; k++) {
            let v = f32(i32((q >> (8u * k)) & 0xFFu) - 32);
            if (i < 4u) {
                s0 = fma(v, x[xo + 4u * i + k], s0);
            } else {
                s1 = fma(v, x[xo + 4u * i + k], s1);
            }
        }
    }
    return q6k_dot(s.d_scale0, s.d_scale1, s0, s1);
}
