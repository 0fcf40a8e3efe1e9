//! Seeded pseudo-random kernel inputs: weight rows of any GGUF type with small, finite
//! scales, and activations. The CPU kernels' tests and the GPU's checks against the CPU
//! ([`crate::gpu::checks`], which also run in a browser) draw the same inputs from here.

use crate::gguf::GgmlType;

/// Deterministic pseudo-random bytes.
pub(crate) fn bytes(n: usize, seed: u64) -> Vec<u8> {
    let mut s = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..n)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            (s >> 24) as u8
        })
        .collect()
}

/// A weight row of `n` elements with small, finite half-float scales.
pub(crate) fn weight_row(ty: GgmlType, n: usize, seed: u64) -> Vec<u8> {
    let bb = ty.block_bytes() as usize;
    let mut row = bytes(n / ty.block_elements() as usize * bb, seed);
    let half = |row: &mut [u8], at: usize| {
        row[at..at + 2].copy_from_slice(&crate::quant::f32_to_f16(0.01 + (at % 7) as f32 * 0.003).to_le_bytes())
    };
    for b in row.chunks_exact_mut(bb) {
        match ty {
            GgmlType::Q4_0 | GgmlType::Q5_0 | GgmlType::Q8_0 => half(b, 0),
            GgmlType::Q4_1 | GgmlType::Q5_1 | GgmlType::Q4K | GgmlType::Q5K => {
                half(b, 0);
                half(b, 2);
            }
            GgmlType::Q6K => half(b, 208),
            // Random mantissas and signs, exponents kept to about 1/32 .. 1/8 (f16) and
            // 1/8 .. 2 (bf16): every value differs, and none is near a limit.
            GgmlType::F16 => b[1] = (b[1] & 0x87) | 0x28,
            GgmlType::F32 => b.copy_from_slice(&0.25f32.to_le_bytes()),
            GgmlType::BF16 => b[1] = (b[1] & 0x81) | 0x3E,
        }
    }
    row
}

/// `n` activations, evenly spread over about ±3.2.
pub(crate) fn activations(n: usize, seed: u64) -> Vec<f32> {
    bytes(n, seed).iter().map(|&b| (f32::from(b) - 127.5) / 40.0).collect()
}
