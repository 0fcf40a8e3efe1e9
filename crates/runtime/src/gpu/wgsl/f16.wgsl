// f32 → f16 with integer operations, rounding to nearest with ties to even (subnormals,
// overflow to infinity, NaN kept), exactly as the CPU's `f32_to_f16` does. Prepended to the
// kernels that round or pack to f16.
//
// Why not `pack2x16float`: WGSL lets an implementation round its conversion either way,
// and NVIDIA's Vulkan compiler folds `unpack2x16float(pack2x16float(x))` back to `x`: on an
// H100 the kernel checks saw values that were no f16 at all. Integer operations are neither
// folded nor rounded at the driver's choice. `unpack2x16float` of such bits is exact.

fn f16_bits(x: f32) -> u32 {
    let u = bitcast<u32>(x);
    let sign = (u >> 16u) & 0x8000u;
    let a = u & 0x7fffffffu;
    if (a >= 0x7f800000u) {
        // Infinity, or NaN (kept a quiet NaN).
        return sign | 0x7c00u | select(0u, 0x200u, a > 0x7f800000u);
    }
    if (a >= 0x477ff000u) {
        // 65,520 and up round past 65,504, the largest half.
        return sign | 0x7c00u;
    }
    if (a < 0x38800000u) {
        // Below 2^-14, the smallest normal half: multiples of 2^-24 (the scaling is exact,
        // and WGSL's round is to nearest even). 1024 · 2^-24 is the smallest normal's bits.
        return sign | u32(round(abs(x) * 16777216.0));
    }
    // Normal: 23 mantissa bits to 10, to nearest even, then the exponent's bias from 127 to 15
    // (a carry out of the mantissa steps the exponent up, as it should).
    let r = a + 0x0fffu + ((a >> 13u) & 1u);
    return sign | ((r - 0x38000000u) >> 13u);
}

// `x` rounded to f16 precision, as an f32.
fn f16_round(x: f32) -> f32 {
    return unpack2x16float(f16_bits(x)).x;
}

// Two values as f16 halves in one word, `a` in the low half.
fn pack_f16(a: f32, b: f32) -> u32 {
    return f16_bits(a) | (f16_bits(b) << 16u);
}
