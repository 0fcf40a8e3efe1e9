// Q4_0 and Q4_1 blocks for matvec.wgsl (after the format's `Q_BIAS`: 8 for Q4_0, 0 for
// Q4_1), against activations quantized by quantize_q8.wgsl (x holds their q values, then
// (d, s) per block from `p.scales_at`). A block is 20 bytes (5 words): word 0 = d (f16,
// low half) and m (f16, high half; Q4_0's 18-byte blocks are re-laid at upload with a
// zero there); words 1..5 = 16 bytes whose low nibbles are values 0..16 and high nibbles
// values 16..32. value = d·(q − Q_BIAS) + m, so a block's dot product is
// d·dx·Σ(q − Q_BIAS)·qx + m·s, as the CPU backend sums it (the integer sum is exact in
// f32: |Σ| ≤ 32 · 15 · 127 < 2^24; with m = 0 the last term adds nothing).

fn block_dot(block: u32, xo: u32) -> f32 {
    let base = block * 5u;
    let dm = unpack2x16float(w[base]);
    var sqq = 0.0;
    for (var i = 0u; i < 4u; i++) {
        let q = w[base + 1u + i];
        for (var k = 0u; k < 4u; k++) {
            let j = i * 4u + k;
            let byte = (q >> (8u * k)) & 0xFFu;
            sqq += f32(i32(byte & 0xFu) - Q_BIAS) * x[xo + j] + f32(i32(byte >> 4u) - Q_BIAS) * x[xo + j + 16u];
        }
    }
    let s = p.scales_at + 2u * (xo / 32u);
    // `fma`: the same rounding in every kernel shape (q4k_dot says why).
    return fma(dm.x * x[s], sqq, dm.y * x[s + 1u]);
}
