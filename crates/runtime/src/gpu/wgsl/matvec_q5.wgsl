// Q5_0's and Q5_1's `block_dot` for matvec.wgsl (after q5.wgsl), against activations
// quantized by quantize_q8.wgsl, summed as matvec_q4.wgsl sums (exact integer sums, then
// d·dx·Σq·qx + m·s).

fn block_dot(block: u32, xo: u32) -> f32 {
    let base = block * 6u;
    let dm = unpack2x16float(w[base]);
    var sqq = 0.0;
    for (var i = 0u; i < 4u; i++) {
        for (var k = 0u; k < 4u; k++) {
            let j = i * 4u + k;
            let v = q5_pair(base, i, k);
            sqq += v.x * x[xo + j] + v.y * x[xo + j + 16u];
        }
    }
    let s = p.scales_at + 2u * (xo / 32u);
    return fma(dm.x * x[s], sqq, dm.y * x[s + 1u]);
}
