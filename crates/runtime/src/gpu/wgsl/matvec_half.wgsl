// 16-bit float weights (f16 or bf16) for matvec.wgsl, after the format's `weight_pair`
// (two values from a word, low half first, as f32): 32 values a sub-block (16 words),
// summed in order against f32 activations, as matvec_f32.wgsl sums f32 weights.

fn block_dot(block: u32, xo: u32) -> f32 {
    var s = 0.0;
    for (var k = 0u; k < 16u; k++) {
        let v = weight_pair(w[16u * block + k]);
        s = fma(v.x, x[xo + 2u * k], s);
        s = fma(v.y, x[xo + 2u * k + 1u], s);
    }
    return s;
}
