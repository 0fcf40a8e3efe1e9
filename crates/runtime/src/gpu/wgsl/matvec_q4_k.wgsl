// Q4_K's and Q5_K's `block_dot` for matvec.wgsl on the f32 path (after q4_k.wgsl): a
// sub-block against f32 activations (multiply-adds as `fma`: q4k_dot says why).

fn block_dot(block: u32, xo: u32) -> f32 {
    let s = q4k_sub(block);
    var sqx = 0.0;
    var sx = 0.0;
    for (var i = 0u; i < 8u; i++) {
        let q = q4k_word(s, i);
        for (var k = 0u; k < 4u; k++) {
            let v = x[xo + i * 4u + k];
            sqx = fma(f32((q >> (8u * k)) & 0xFFu), v, sqx);
            sx += v;
        }
    }
    return q4k_dot(s.d_scale, s.dmin_min, sqx, sx);
}
