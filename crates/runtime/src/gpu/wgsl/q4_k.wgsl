// Q4_K blocks, for the Q4_K matrix kernels (matvec_q4_k.wgsl and matmul_q4_k.wgsl on the
// f32 path, matvec_q4_k_f16.wgsl and matmul_q4_k_f16.wgsl on the f16 path). A block (144 bytes, 36 words) holds 256 values in
// eight sub-blocks of 32: word 0 = d and dmin (f16 halves), bytes 4..16 = twelve bytes
// packing eight 6-bit scales and eight 6-bit mins, bytes 16..144 = 128 bytes of 4-bit
// values (sub-blocks 2i and 2i+1 share 32 bytes: low nibbles, then high). value =
// d·scale·q − dmin·min. The kernels' unit is the 32-value sub-block (so a 1,536-wide row
// keeps 48 threads busy, not 6): `block` counts sub-blocks.

// A sub-block's dot product from Σq·x and Σx: one function, so the matrix-vector and the
// tiled kernels do the same arithmetic (product_io.wgsl says why that matters; `fma`
// leaves a compiler no multiply-add to contract in one kernel and not the other).
fn q4k_dot(d_scale: f32, dmin_min: f32, sqx: f32, sx: f32) -> f32 {
    return fma(d_scale, sqx, -(dmin_min * sx));
}

// One sub-block: its multipliers and where its values are.
struct Q4kSub {
    d_scale: f32,  // d · scale
    dmin_min: f32, // dmin · min
    qs: u32,       // the word holding its first four values (low or high nibbles)
    shift: u32,    // 0 for low nibbles, 4 for high
}

fn q4k_sub(block: u32) -> Q4kSub {
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
    return Q4kSub(dm.x * f32(sc), dm.y * f32(mn), base + 4u + 8u * (j / 2u), 4u * (j % 2u));
}
