// Q6_K blocks for matvec.wgsl, against f32 activations. A block is re-laid at upload from
// 210 bytes to 212 (53 words, two zero bytes after d): bytes 0..128 = the low 4 bits of
// 256 values, 128..192 = their high 2 bits, 192..208 = sixteen signed 8-bit scales (one
// per 16 values), 208..210 = d (f16). Within each half of 128 values, value 32·r + l
// (r = 0..4, l = 0..32) takes low bits from byte 64·half + 32·(r % 2) + l (low nibble for
// r < 2, high for r ≥ 2) and high bits from byte 128 + 32·half + l, shifted by 2·r; value
// = d·scale·(q − 32). The shader's unit is the 32-value sub-block: `block` counts them.

const BLOCK_VALUES: u32 = 32u;

fn block_dot(block: u32, xo: u32) -> f32 {
    let base = (block / 8u) * 53u;
    let j = block % 8u;
    let half = j / 4u;
    let r = j % 4u;
    let d = unpack2x16float(w[base + 52u]).x;
    let ql = 64u * half + 32u * (r % 2u);
    let low_shift = 4u * (r / 2u);
    let qh = 128u + 32u * half;
    // Scales for values 0..16 and 16..32 of this sub-block.
    let si = 192u + 8u * half + 2u * r;
    let sc0 = f32(extractBits(bitcast<i32>(weight_byte(base, si)), 0u, 8u));
    let sc1 = f32(extractBits(bitcast<i32>(weight_byte(base, si + 1u)), 0u, 8u));
    var s0 = 0.0;
    var s1 = 0.0;
    for (var l = 0u; l < 32u; l++) {
        let lo = (weight_byte(base, ql + l) >> low_shift) & 0xFu;
        let hi = (weight_byte(base, qh + l) >> (2u * r)) & 3u;
        let q = f32(i32(lo | (hi << 4u)) - 32) * x[xo + l];
        if (l < 16u) {
            s0 += q;
        } else {
            s1 += q;
        }
    }
    return d * (sc0 * s0 + sc1 * s1);
}
