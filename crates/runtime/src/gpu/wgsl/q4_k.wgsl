// Q4_K and Q5_K blocks, for their matrix kernels (matvec_q4_k.wgsl and matmul_q4_k.wgsl
// on the f32 path, matvec_q4_k_f16.wgsl and matmul_q4_k_f16.wgsl on the f16 path), after
// the format's `K_WORDS` (36 or 44) and `K_HIGH_BITS` (false or true).
//
// A Q4_K block (144 bytes, 36 words) holds 256 values in eight sub-blocks of 32: word 0 =
// d and dmin (f16 halves), bytes 4..16 = twelve bytes packing eight 6-bit scales and eight
// 6-bit mins, bytes 16..144 = 128 bytes of 4-bit values (sub-blocks 2i and 2i+1 share 32
// bytes: low nibbles, then high). value = d·scale·q − dmin·min. A Q5_K block (176 bytes, 44
// words) gives each value a fifth bit: the same first 16 bytes, then 32 bytes of high bits
// (byte l holds bit j for value l of sub-block j), then the 4-bit values as Q4_K lays them.
// The kernels' unit is the 32-value sub-block (so a 1,536-wide row keeps 48 threads busy,
// not 6): `block` counts sub-blocks.

// A sub-block's dot product from Σq·x and Σx: one function, so the matrix-vector and the
// tiled kernels do the same arithmetic (product_io.wgsl says why that matters; `fma`
// leaves a compiler no multiply-add to contract in one kernel and not the other).
fn q4k_dot(d_scale: f32, dmin_min: f32, sqx: f32, sx: f32) -> f32 {
    return fma(d_scale, sqx, -(dmin_min * sx));
}

// One sub-block: its multipliers and where its values are.
struct Q4kSub {
    d_scale: f32,    // d · scale
    dmin_min: f32,   // dmin · min
    qs: u32,         // the word holding its first four values' low bits
    shift: u32,      // 0 for low nibbles, 4 for high
    qh: u32,         // Q5_K: the word holding their high bits
    high_shift: u32, // Q5_K: the sub-block's bit in each high byte
}

// Sub-block j's 6-bit scale and min, from the twelve bytes from word `sb`.
fn scale_min_k4(sb: u32, j: u32) -> vec2<u32> {
    if (j < 4u) {
        return vec2<u32>(weight_byte(sb, j) & 63u, weight_byte(sb, j + 4u) & 63u);
    }
    return vec2<u32>(
        (weight_byte(sb, j + 4u) & 0xFu) | ((weight_byte(sb, j - 4u) >> 6u) << 4u),
        (weight_byte(sb, j + 4u) >> 4u) | ((weight_byte(sb, j) >> 6u) << 4u),
    );
}

fn q4k_sub(block: u32) -> Q4kSub {
    let base = (block / 8u) * K_WORDS;
    let j = block % 8u;
    let dm = unpack2x16float(w[base]);
    // The scales and mins start at byte 4 (word 1); the low bits after them (Q4_K) or
    // after the high bits (Q5_K: 8 words on).
    let sm = scale_min_k4(base + 1u, j);
    let qs = base + 4u + select(0u, 8u, K_HIGH_BITS) + 8u * (j / 2u);
    return Q4kSub(dm.x * f32(sm.x), dm.y * f32(sm.y), qs, 4u * (j % 2u), base + 4u, j);
}

// Values 4i .. 4i + 4 of sub-block `s` as q (0..16, or 0..32 for Q5_K), one a byte.
fn q4k_word(s: Q4kSub, i: u32) -> u32 {
    let low = (w[s.qs + i] >> s.shift) & 0x0F0F0F0Fu;
    if (K_HIGH_BITS) {
        return low | (((w[s.qh + i] >> s.high_shift) & 0x01010101u) << 4u);
    }
    return low;
}
