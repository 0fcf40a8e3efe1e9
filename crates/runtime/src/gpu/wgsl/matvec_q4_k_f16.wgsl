// Q4_K's and Q5_K's `block_dot` for matvec.wgsl on the f16 path (after q4_k.wgsl and
// matvec_f16.wgsl): a sub-block against activations from activations_f16.wgsl (scaled
// into (-1, 1) by 2^-e per 32 values). The 4- or 5-bit values and the scaled activations
// meet in f16 four at a time (`dot` of two vec4<f16>: |q·x| < 32 a term, so no overflow),
// and the four-term sums are added in f32. The sub-block's dot product is
// 2^e·(d·scale·Σq·x − dmin·min·Σx).

fn block_dot(block: u32, xo: u32) -> f32 {
    let s = q4k_sub(block);
    var sqx = 0.0;
    var sx = 0.0;
    for (var i = 0u; i < 8u; i++) {
        let xv = x4_f16(xo + 4u * i);
        sqx += f32(dot(bytes_f16(q4k_word(s, i)), xv));
        sx += f32(xv.x + xv.y) + f32(xv.z + xv.w);
    }
    return x_scale(xo) * q4k_dot(s.d_scale, s.dmin_min, sqx, sx);
}
