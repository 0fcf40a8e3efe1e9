// Q5_0 and Q5_1 blocks (after the format's `Q_BIAS`: 16 for Q5_0, 0 for Q5_1), for
// matvec_q4_q5.wgsl and matmul_q4_q5.wgsl. A block is 24 bytes (6 words): word 0 = d (f16,
// low half) and m (f16, high half; Q5_0's 22-byte blocks are re-laid at upload with a
// zero there), word 1 = the high bits (bit j for value j), words 2..6 = 16 bytes whose low
// nibbles are the low 4 bits of values 0..16 and high nibbles those of values 16..32.
// value = d·(q − Q_BIAS) + m.

const BLOCK_WORDS: u32 = 6u;

// Values j and j + 16 of the block from word `base` as q − Q_BIAS, j = 4i + k (i < 4).
fn block_pair(base: u32, i: u32, k: u32) -> vec2<f32> {
    let j = 4u * i + k;
    let qh = w[base + 1u];
    let byte = (w[base + 2u + i] >> (8u * k)) & 0xFFu;
    let lo = (byte & 0xFu) | (((qh >> j) & 1u) << 4u);
    let hi = (byte >> 4u) | (((qh >> (j + 16u)) & 1u) << 4u);
    return vec2<f32>(f32(i32(lo) - Q_BIAS), f32(i32(hi) - Q_BIAS));
}
