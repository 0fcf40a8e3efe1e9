// Q4_0 and Q4_1 blocks (after the format's `Q_BIAS`: 8 for Q4_0, 0 for Q4_1), for
// matvec_q4_q5.wgsl and matmul_q4_q5.wgsl. A block is 20 bytes (5 words): word 0 = d (f16,
// low half) and m (f16, high half; Q4_0's 18-byte blocks are re-laid at upload with a
// zero there); words 1..5 = 16 bytes whose low nibbles are values 0..16 and high nibbles
// values 16..32. value = d·(q − Q_BIAS) + m.

const BLOCK_WORDS: u32 = 5u;

// Values j and j + 16 of the block from word `base` as q − Q_BIAS, j = 4i + k (i < 4).
fn block_pair(base: u32, i: u32, k: u32) -> vec2<f32> {
    let byte = (w[base + 1u + i] >> (8u * k)) & 0xFFu;
    return vec2<f32>(f32(i32(byte & 0xFu) - Q_BIAS), f32(i32(byte >> 4u) - Q_BIAS));
}
