// Q6_K blocks, for the Q6_K matrix kernels (matvec_q6_k.wgsl and matmul_q6_k.wgsl on the
// f32 path, matvec_q6_k_f16.wgsl and matmul_q6_k_f16.wgsl on the f16 path). A block is re-laid at upload from 210 bytes to
// 212 (53 words, two zero bytes after d): bytes 0..128 = the low 4 bits of 256 values,
// 128..192 = their high 2 bits, 192..208 = sixteen signed 8-bit scales (one per 16
// values), 208..210 = d (f16). Within each half of 128 values, value 32·r + l (r = 0..4,
// l = 0..32) takes low bits from byte 64·half + 32·(r % 2) + l (low nibble for r < 2, high
// for r ≥ 2) and high bits from byte 128 + 32·half + l, shifted by 2·r; value =
// d·scale·(q − 32). The kernels' unit is the 32-value sub-block: `block` counts them.

// A sub-block's dot product from its halves' Σ(q − 32)·x: one function, so the
// matrix-vector and the tiled kernels do the same arithmetic (product_io.wgsl; `fma`, as
// in q4k_dot).
fn q6k_dot(d_scale0: f32, d_scale1: f32, s0: f32, s1: f32) -> f32 {
    return fma(d_scale0, s0, d_scale1 * s1);
}

// One sub-block: its multipliers and where its values are.
struct Q6kSub {
    d_scale0: f32,   // d · the scale of values 0..16
    d_scale1: f32,   // d · the scale of values 16..32
    ql: u32,         // the word holding the low bits of its first four values
    low_shift: u32,  // 0 (low nibbles) or 4 (high)
    qh: u32,         // the word holding their high bits
    high_shift: u32, // 2·r
}

fn q6k_sub(block: u32) -> Q6kSub {
    let base = (block / 8u) * 53u;
    let j = block % 8u;
    let half = j / 4u;
    let r = j % 4u;
    let d = unpack2x16float(w[base + 52u]).x;
    let si = 192u + 8u * half + 2u * r;
    let sc0 = f32(extractBits(bitcast<i32>(weight_byte(base, si)), 0u, 8u));
    let sc1 = f32(extractBits(bitcast<i32>(weight_byte(base, si + 1u)), 0u, 8u));
    return Q6kSub(d * sc0, d * sc1, base + 16u * half + 8u * (r % 2u), 4u * (r / 2u), base + 32u + 8u * half, 2u * r);
}

// Values 4i .. 4i + 4 of sub-block `s` as q (0..64), one a byte.
fn q6k_word(s: Q6kSub, i: u32) -> u32 {
    return ((w[s.ql + i] >> s.low_shift) & 0x0F0F0F0Fu) | (((w[s.qh + i] >> s.high_shift) & 0x03030303u) << 4u);
}
