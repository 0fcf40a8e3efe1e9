// Q4_K blocks for matvec.wgsl, against f32 activations. A block (144 bytes, 36 words)
// holds 256 values in eight sub-blocks of 32: word 0 = d and dmin (f16 halves), bytes
// 4..16 = twelve bytes packing eight 6-bit scales and eight 6-bit mins, bytes 16..144 =
// 128 bytes of 4-bit values (sub-blocks 2i and 2i+1 share 32 bytes: low nibbles, then
// high). value = d·scale·q − dmin·min. The shader's unit is the 32-value sub-block (so a
// 1,536-wide row keeps 48 threads busy, not 6): `block` counts sub-blocks.

const BLOCK_VALUES: u32 = 32u;

fn block_dot(block: u32, xo: u32) -> f32 {
    let base = (block / 8u) * 36u;
    let j = block % 8u;
    let dm = unpack2x16float(w[base]);
    // The scales and mins start at byte 4 (word 1).
    let sb = base + 1u;
    var sc: u32;
    var mn: u32;
    if (j < 4u) {
        sc = weight_byte(sb, j) & 63u;
        mn = weight_byte(sb, j + 4u) & 63u;
    } else {
        sc = (weight_byte(sb, j + 4u) & 0xFu) | ((weight_byte(sb, j - 4u) >> 6u) << 4u);
        mn = (weight_byte(sb, j + 4u) >> 4u) | ((weight_byte(sb, j) >> 6u) << 4u);
    }
    let qs = base + 4u + 8u * (j / 2u);
    let shift = 4u * (j % 2u);
    var sqx = 0.0;
    var sx = 0.0;
    for (var i = 0u; i < 8u; i++) {
        let q = w[qs + i] >> shift;
        for (var k = 0u; k < 4u; k++) {
            let v = x[xo + i * 4u + k];
            sqx += f32((q >> (8u * k)) & 0xFu) * v;
            sx += v;
        }
    }
    return dm.x * f32(sc) * sqx - dm.y * f32(mn) * sx;
}
