// The 4- and 5-bit 32-value blocks' `block_dot` for matvec.wgsl (after q4.wgsl or
// q5.wgsl, which give `block_pair` and `BLOCK_WORDS`), against activations quantized by
// quantize_q8.wgsl (x holds their q values, then (d, s) per block from `p.scales_at`).
// A block's dot product is d·dx·Σ(q − Q_BIAS)·qx + m·s, as the CPU backend sums it (the
// integer sum is exact in f32: |Σ| ≤ 32 · 31 · 127 < 2^24; with m = 0, as Q4_0's and
// Q5_0's re-laid blocks have, the last term adds nothing).

fn block_dot(block: u32, xo: u32) -> f32 {
    let base = block * BLOCK_WORDS;
    let dm = unpack2x16float(w[base]);
    var sqq = 0.0;
    for (var i = 0u; i < 4u; i++) {
        for (var k = 0u; k < 4u; k++) {
            let j = i * 4u + k;
            let v = block_pair(base, i, k);
            sqq += v.x * x[xo + j] + v.y * x[xo + j + 16u];
        }
    }
    let s = p.scales_at + 2u * (xo / 32u);
    // `fma`: the same rounding in every kernel shape (q4k_dot says why).
    return fma(dm.x * x[s], sqq, dm.y * x[s + 1u]);
}
