// Q8_0 blocks for matvec.wgsl, against activations quantized by quantize_q8.wgsl (x holds
// their q values, then (d, s) per block from `p.scales_at`). A Q8_0 block is re-laid at
// upload from 34 bytes to 36 (9 words): word 0 = d (f16, low half), words 1..9 = 32
// signed bytes. The dot product is d·dx·Σq·qx, the integer sum exact in f32.

fn block_dot(block: u32, xo: u32) -> f32 {
    let base = block * 9u;
    let d = unpack2x16float(w[base]).x;
    var sqq = 0.0;
    for (var i = 0u; i < 8u; i++) {
        let q = bitcast<i32>(w[base + 1u + i]);
        for (var k = 0u; k < 4u; k++) {
            sqq += f32(extractBits(q, 8u * k, 8u)) * x[xo + i * 4u + k];
        }
    }
    return d * x[p.scales_at + 2u * (xo / 32u)] * sqq;
}
