//! The integer inner products of the portable kernels ([`super::dot`]): one block's
//! weights (unpacked to small integers) times its int8 activations.
//!
//! Integer sums are exact in any order, so these are free to vectorize: on wasm32 built
//! with `simd128` they use 128-bit lanes (`i16x8.extmul` products of small weights added
//! in 16 bits, or `i32x4.dot_i16x8_s` on sign-extended bytes for full-range ones); on
//! other targets without AVX2 they are the plain loops of `portable`. Either way the
//! float arithmetic around them, and so every result, is the same, which [`check`] holds
//! the vector code to on the machine it runs on.

/// Dispatch to the `simd128` kernel where the build has it, else the portable loop.
macro_rules! dispatch {
    ($name:ident($($arg:expr),*)) => {{
        #[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
        {
            simd::$name($($arg),*)
        }
        #[cfg(not(all(target_arch = "wasm32", target_feature = "simd128")))]
        {
            portable::$name($($arg),*)
        }
    }};
}

/// `Σ w[i]·y[i]` over 32 signed bytes (a Q8_0 block).
#[inline]
pub fn q8_block(w: &[u8], y: &[i8]) -> i32 {
    dispatch!(q8_block(w, y))
}

/// A 16-byte nibble block against 32 activations: low nibbles × `y[0..16]`, high nibbles
/// × `y[16..32]`, each nibble offset by `-bias` (8 for Q4_0, 0 for Q4_1).
#[inline]
pub fn nibble_block(qs: &[u8], y: &[i8], bias: i8) -> i32 {
    dispatch!(nibble_block(qs, y, bias))
}

/// A Q4_K super-block's 256 nibbles (`qs`, 128 bytes) against 256 activations, each
/// 32-value sub-block `j` scaled by `sc[j]`.
#[inline]
pub fn q4k_block(qs: &[u8], sc: &[u8; 8], y: &[i8]) -> i32 {
    dispatch!(q4k_block(qs, sc, y))
}

/// One half (128 values) of a Q6_K super-block, scales applied: `ql` 64 bytes, `qh` 32,
/// `sc` its 8 scales, `y` 128 activations.
#[inline]
pub fn q6k_half(ql: &[u8], qh: &[u8], sc: &[u8], y: &[i8]) -> i32 {
    dispatch!(q6k_half(ql, qh, sc, y))
}

/// Every kernel above against its portable loop on seeded inputs, extremes included (all
/// weights and activations at their limits, where a 16-bit partial sum would overflow if
/// the vector code's bound were wrong). Returns the number of cases; an error names the
/// kernel, the case and both values. Cheap (a few thousand blocks): the wasm package runs
/// it when asked (`cpuKernelCheck`), as the WebGPU kernels are checked on the user's
/// adapter.
pub fn check() -> Result<usize, String> {
    let mut next = xorshift(0x9E37_79B9_7F4A_7C15);
    let mut cases = 0;
    for case in 0..200 {
        // Cases 0..4: every byte at one extreme; then random bytes.
        let fill = |n: usize, next: &mut dyn FnMut() -> u64, extreme: Option<u8>| -> Vec<u8> {
            (0..n).map(|_| extreme.unwrap_or_else(|| next() as u8)).collect()
        };
        let (wx, yx) = match case {
            0 => (Some(0xFF), Some(0x80)),
            1 => (Some(0x00), Some(0x80)),
            2 => (Some(0xFF), Some(0x7F)),
            3 => (Some(0x80), Some(0x80)),
            _ => (None, None),
        };
        let w = fill(256, &mut next, wx);
        let y: Vec<i8> = fill(256, &mut next, yx).into_iter().map(|b| b as i8).collect();
        let sc8: [u8; 8] = std::array::from_fn(|i| if wx.is_some() { 63 } else { w[200 + i] & 63 });
        let sc6: Vec<u8> = (0..8).map(|i| if wx.is_some() { 0x80 } else { w[240 + i] }).collect();
        let pairs = [
            ("q8_block", q8_block(&w, &y), portable::q8_block(&w, &y)),
            ("nibble_block bias 8", nibble_block(&w, &y, 8), portable::nibble_block(&w, &y, 8)),
            ("nibble_block bias 0", nibble_block(&w, &y, 0), portable::nibble_block(&w, &y, 0)),
            ("q4k_block", q4k_block(&w[..128], &sc8, &y), portable::q4k_block(&w[..128], &sc8, &y)),
            ("q6k_half", q6k_half(&w[..64], &w[64..96], &sc6, &y), portable::q6k_half(&w[..64], &w[64..96], &sc6, &y)),
        ];
        for (name, got, want) in pairs {
            if got != want {
                return Err(format!("CPU kernel {name}, case {case}: {got}, the portable loop gives {want}"));
            }
            cases += 1;
        }
    }
    Ok(cases)
}

/// A seeded xorshift64 generator: the kernel checks' inputs, the same on every machine.
pub(super) fn xorshift(seed: u64) -> impl FnMut() -> u64 {
    let mut state = seed;
    move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    }
}

/// The plain loops: the kernels on targets without `simd128`, and the reference
/// [`check`] compares the vector code with.
mod portable {
    pub fn q8_block(w: &[u8], y: &[i8]) -> i32 {
        w[..32].iter().zip(&y[..32]).map(|(&w, &v)| i32::from(w as i8) * i32::from(v)).sum()
    }

    pub fn nibble_block(qs: &[u8], y: &[i8], bias: i8) -> i32 {
        let b = i32::from(bias);
        (0..16).map(|j| (i32::from(qs[j] & 0xF) - b) * i32::from(y[j]) + (i32::from(qs[j] >> 4) - b) * i32::from(y[j + 16])).sum()
    }

    pub fn q4k_block(qs: &[u8], sc: &[u8; 8], y: &[i8]) -> i32 {
        let nibble = |j: usize, l: usize| {
            let b = qs[32 * (j / 2) + l];
            i32::from(if j % 2 == 1 { b >> 4 } else { b & 0xF })
        };
        (0..8).map(|j| i32::from(sc[j]) * (0..32).map(|l| nibble(j, l) * i32::from(y[32 * j + l])).sum::<i32>()).sum()
    }

    pub fn q6k_half(ql: &[u8], qh: &[u8], sc: &[u8], y: &[i8]) -> i32 {
        let mut sumi = 0i32;
        for l in 0..32 {
            let is = l / 16;
            let q1 = i32::from((ql[l] & 0xF) | ((qh[l] & 3) << 4)) - 32;
            let q2 = i32::from((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32;
            let q3 = i32::from((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
            let q4 = i32::from((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
            sumi += i32::from(sc[is] as i8) * q1 * i32::from(y[l])
                + i32::from(sc[is + 2] as i8) * q2 * i32::from(y[l + 32])
                + i32::from(sc[is + 4] as i8) * q3 * i32::from(y[l + 64])
                + i32::from(sc[is + 6] as i8) * q4 * i32::from(y[l + 96]);
        }
        sumi
    }
}

// Unsafe code: `v128_load` reads 16 bytes through a raw pointer (each call checks the slice
// is long enough first).
#[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
#[allow(unsafe_code)]
pub(super) mod simd {
    use core::arch::wasm32::*;

    /// 16 bytes at `p` (unaligned).
    #[inline(always)]
    pub(in crate::cpu) fn load(s: &[u8]) -> v128 {
        assert!(s.len() >= 16);
        // SAFETY: 16 bytes are in bounds (checked); wasm loads need no alignment.
        unsafe { v128_load(s.as_ptr() as *const v128) }
    }

    #[inline(always)]
    pub(in crate::cpu) fn load_i8(s: &[i8]) -> v128 {
        assert!(s.len() >= 16);
        // SAFETY: as in `load`.
        unsafe { v128_load(s.as_ptr() as *const v128) }
    }

    /// Σ a·b over 16 signed bytes, as 4 i32 lanes.
    #[inline(always)]
    fn dot16(a: v128, b: v128) -> v128 {
        let lo = i32x4_dot_i16x8(i16x8_extend_low_i8x16(a), i16x8_extend_low_i8x16(b));
        let hi = i32x4_dot_i16x8(i16x8_extend_high_i8x16(a), i16x8_extend_high_i8x16(b));
        i32x4_add(lo, hi)
    }

    /// Σ w·y over 16 signed bytes, as 4 i32 lanes, for small weights (|w| ≤ 32, as in
    /// 4- and 6-bit blocks): each product fits 13 bits, so the two products of a lane pair
    /// are added as i16 before one widening (3 instructions fewer than [`dot16`]).
    #[inline(always)]
    pub(in crate::cpu) fn dot16_small(w: v128, y: v128) -> v128 {
        i32x4_extadd_pairwise_i16x8(i16x8_add(i16x8_extmul_low_i8x16(w, y), i16x8_extmul_high_i8x16(w, y)))
    }

    /// [`dot16_small`] before its widening: 8 i16 lanes, each two products (at most
    /// 2 · 32 · 128 = 8,192 in size), for a caller that widens them and multiplies by a
    /// scale in one `i32x4_dot_i16x8` (x86's `pmaddwd`) instead of a widening and an
    /// `i32x4_mul` (`pmulld`: two µops and ten cycles of latency).
    #[inline(always)]
    pub(in crate::cpu) fn dot16_small_i16(w: v128, y: v128) -> v128 {
        i16x8_add(i16x8_extmul_low_i8x16(w, y), i16x8_extmul_high_i8x16(w, y))
    }

    /// [`dot32_nibbles`] before its widening, as [`dot16_small_i16`]: 8 i16 lanes, each
    /// four products of a weight in 0..=15 (at most 4 · 15 · 128 = 7,680 in size). With
    /// relaxed SIMD, two `pmaddubsw` and an add.
    #[cfg_attr(not(feature = "relaxed-simd"), inline(always))]
    #[cfg_attr(feature = "relaxed-simd", inline, target_feature(enable = "relaxed-simd"))]
    pub(in crate::cpu) fn dot32_nibbles_i16(w0: v128, y0: v128, w1: v128, y1: v128) -> v128 {
        #[cfg(feature = "relaxed-simd")]
        {
            // Exact: weights in 0..=127, so no lane pair saturates (2 · 127 · 128 < 2^15).
            i16x8_add(i16x8_relaxed_dot_i8x16_i7x16(y0, w0), i16x8_relaxed_dot_i8x16_i7x16(y1, w1))
        }
        #[cfg(not(feature = "relaxed-simd"))]
        {
            i16x8_add(dot16_small_i16(w0, y0), dot16_small_i16(w1, y1))
        }
    }

    /// [`dot16_small`] over 32 values (`w0·y0 + w1·y1`) for weights in 0..=15 (|w·y| ≤
    /// 1,920, so the four products a lane gathers stay within an i16).
    #[cfg_attr(not(feature = "relaxed-simd"), inline(always))]
    #[cfg_attr(feature = "relaxed-simd", inline, target_feature(enable = "relaxed-simd"))]
    pub(in crate::cpu) fn dot32_nibbles(w0: v128, y0: v128, w1: v128, y1: v128) -> v128 {
        #[cfg(feature = "relaxed-simd")]
        {
            dot32_small_unsigned(w0, y0, w1, y1)
        }
        #[cfg(not(feature = "relaxed-simd"))]
        {
            let p0 = i16x8_add(i16x8_extmul_low_i8x16(w0, y0), i16x8_extmul_high_i8x16(w0, y0));
            let p1 = i16x8_add(i16x8_extmul_low_i8x16(w1, y1), i16x8_extmul_high_i8x16(w1, y1));
            i32x4_extadd_pairwise_i16x8(i16x8_add(p0, p1))
        }
    }

    /// `w0·y0 + w1·y1` over 32 values as 4 i32 lanes, for weights in 0..=127, with the
    /// relaxed-SIMD dot product (x86's `pmaddubsw`/VNNI, Arm's `sdot`): two instructions
    /// for what takes seven without it. Exact for such weights: each lane adds four products
    /// of at most 127·128, and the relaxed rules leave only weights ≥ 128 to the engine.
    /// (V8 11.3, Node 20's, behind `--experimental-wasm-relaxed-simd`, returns twice the
    /// sum on x86 with AVX-512 VNNI; the load-time kernel check refuses such an engine.)
    ///
    /// The relaxed build (the `relaxed-simd` feature, scripts/build-wasm.sh) enables the
    /// feature only on the functions that use it, not the whole module, so the compiler
    /// puts no other relaxed instruction (min, max, truncation, whose results an engine may
    /// choose) anywhere else.
    #[cfg(feature = "relaxed-simd")]
    #[inline]
    #[target_feature(enable = "relaxed-simd")]
    pub(in crate::cpu) fn dot32_small_unsigned(w0: v128, y0: v128, w1: v128, y1: v128) -> v128 {
        i32x4_relaxed_dot_i8x16_i7x16_add(y1, w1, i32x4_relaxed_dot_i8x16_i7x16_add(y0, w0, i32x4_splat(0)))
    }

    #[inline(always)]
    pub(in crate::cpu) fn hsum(v: v128) -> i32 {
        i32x4_extract_lane::<0>(v) + i32x4_extract_lane::<1>(v) + i32x4_extract_lane::<2>(v) + i32x4_extract_lane::<3>(v)
    }

    pub fn q8_block(w: &[u8], y: &[i8]) -> i32 {
        hsum(i32x4_add(dot16(load(&w[..16]), load_i8(&y[..16])), dot16(load(&w[16..32]), load_i8(&y[16..32]))))
    }

    #[cfg_attr(feature = "relaxed-simd", target_feature(enable = "relaxed-simd"))]
    pub fn nibble_block(qs: &[u8], y: &[i8], bias: i8) -> i32 {
        let q = load(&qs[..16]);
        #[cfg(feature = "relaxed-simd")]
        if bias == 0 {
            let (lo, hi) = (v128_and(q, u8x16_splat(0x0F)), u8x16_shr(q, 4));
            return hsum(dot32_small_unsigned(lo, load_i8(&y[..16]), hi, load_i8(&y[16..32])));
        }
        let b = i8x16_splat(bias);
        let lo = i8x16_sub(v128_and(q, u8x16_splat(0x0F)), b);
        let hi = i8x16_sub(u8x16_shr(q, 4), b);
        hsum(i32x4_add(dot16_small(lo, load_i8(&y[..16])), dot16_small(hi, load_i8(&y[16..32]))))
    }

    #[cfg_attr(feature = "relaxed-simd", target_feature(enable = "relaxed-simd"))]
    pub fn q4k_block(qs: &[u8], sc: &[u8; 8], y: &[i8]) -> i32 {
        let m4 = u8x16_splat(0x0F);
        let mut acc = i32x4_splat(0);
        for g in 0..4 {
            let (a, b) = (load(&qs[32 * g..32 * g + 16]), load(&qs[32 * g + 16..32 * g + 32]));
            let y0 = &y[64 * g..64 * g + 64];
            let lo = dot32_nibbles(v128_and(a, m4), load_i8(&y0[..16]), v128_and(b, m4), load_i8(&y0[16..32]));
            let hi = dot32_nibbles(u8x16_shr(a, 4), load_i8(&y0[32..48]), u8x16_shr(b, 4), load_i8(&y0[48..64]));
            acc = i32x4_add(acc, i32x4_mul(lo, i32x4_splat(i32::from(sc[2 * g]))));
            acc = i32x4_add(acc, i32x4_mul(hi, i32x4_splat(i32::from(sc[2 * g + 1]))));
        }
        hsum(acc)
    }

    /// Sixteen values each of a Q6_K half's four quarters, 6-bit weights minus 32: vector
    /// `k` holds values `32·k + lb .. 32·k + lb + 16` (`lb` 0 or 16) of the half in `ql`
    /// (64 bytes) and `qh` (32).
    #[inline(always)]
    pub(in crate::cpu) fn q6k_weights16(ql: &[u8], qh: &[u8], lb: usize) -> [v128; 4] {
        q6k_weights16_offset(ql, qh, lb, 32)
    }

    /// [`q6k_weights16`] minus `offset` instead of 32 (0: the stored 6 bits, 0..=63).
    #[inline(always)]
    pub(in crate::cpu) fn q6k_weights16_offset(ql: &[u8], qh: &[u8], lb: usize, offset: i8) -> [v128; 4] {
        let (m4, m2, c32) = (u8x16_splat(0x0F), u8x16_splat(0x03), i8x16_splat(offset));
        let (l0, l1, h) = (load(&ql[lb..lb + 16]), load(&ql[lb + 32..lb + 48]), load(&qh[lb..lb + 16]));
        let high = |shift: u32| i8x16_shl(v128_and(u8x16_shr(h, shift), m2), 4);
        [
            i8x16_sub(v128_or(v128_and(l0, m4), high(0)), c32),
            i8x16_sub(v128_or(v128_and(l1, m4), high(2)), c32),
            i8x16_sub(v128_or(u8x16_shr(l0, 4), high(4)), c32),
            i8x16_sub(v128_or(u8x16_shr(l1, 4), high(6)), c32),
        ]
    }

    pub fn q6k_half(ql: &[u8], qh: &[u8], sc: &[u8], y: &[i8]) -> i32 {
        // Each 16 values have their own scale: scaled in the vector, summed across lanes once.
        let mut acc = i32x4_splat(0);
        for (g, lb) in [0usize, 16].into_iter().enumerate() {
            for (k, w) in q6k_weights16(ql, qh, lb).into_iter().enumerate() {
                let s = dot16_small(w, load_i8(&y[lb + 32 * k..lb + 32 * k + 16]));
                acc = i32x4_add(acc, i32x4_mul(s, i32x4_splat(i32::from(sc[g + 2 * k] as i8))));
            }
        }
        hsum(acc)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_kernels_agree_with_the_portable_loops() {
        assert_eq!(check(), Ok(1000));
    }

    #[test]
    fn sums_match_the_definitions() {
        let w: Vec<u8> = (0..64u32).map(|i| (i * 97 % 256) as u8).collect();
        let y: Vec<i8> = (0..128i32).map(|i| ((i * 53) % 255 - 127) as i8).collect();
        let direct: i32 = (0..32).map(|i| i32::from(w[i] as i8) * i32::from(y[i])).sum();
        assert_eq!(q8_block(&w, &y), direct);
        let nib: i32 =
            (0..16).map(|j| (i32::from(w[j] & 15) - 8) * i32::from(y[j]) + (i32::from(w[j] >> 4) - 8) * i32::from(y[j + 16])).sum();
        assert_eq!(nibble_block(&w, &y, 8), nib);
        let qs: Vec<u8> = (0..128u32).map(|i| (i * 131 % 256) as u8).collect();
        let y256: Vec<i8> = (0..256i32).map(|i| ((i * 29) % 255 - 127) as i8).collect();
        let sc = [3u8, 63, 0, 17, 1, 40, 9, 22];
        let mut k4 = 0i32;
        for j in 0..8 {
            for l in 0..32 {
                let b = qs[32 * (j / 2) + l];
                k4 += i32::from(sc[j]) * i32::from(if j % 2 == 0 { b & 0xF } else { b >> 4 }) * i32::from(y256[32 * j + l]);
            }
        }
        assert_eq!(q4k_block(&qs, &sc, &y256), k4);
        let sc: Vec<u8> = (0..8u8).map(|i| (i as i8 * 5 - 17) as u8).collect();
        // Each of the 128 values has its own 6 bits and scale.
        let mut want = 0i32;
        for l in 0..32 {
            for k in 0..4 {
                let low = if k % 2 == 0 { w[l + 32 * (k % 2)] } else { w[l + 32] };
                let low = if k < 2 { low & 0xF } else { low >> 4 };
                let q = i32::from(low | (((w[l] >> (2 * k)) & 3) << 4)) - 32;
                want += i32::from(sc[l / 16 + 2 * k] as i8) * q * i32::from(y[l + 32 * k]);
            }
        }
        assert_eq!(q6k_half(&w, &w[..32], &sc, &y), want);
    }
}
