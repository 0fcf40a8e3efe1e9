// f32 weights for matvec.wgsl (the words are the floats' bits), 32 values a sub-block like
// the other formats, summed in order (multiply-adds as `fma`: q4k_dot in q4_k.wgsl says
// why).

fn block_dot(block: u32, xo: u32) -> f32 {
    var s = 0.0;
    for (var k = 0u; k < 32u; k++) {
        s = fma(bitcast<f32>(w[32u * block + k]), x[xo + k], s);
    }
    return s;
}
