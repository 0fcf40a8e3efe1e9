//! Sums in the order ggml's SIMD kernels add them, for the attention path.
//!
//! Attention weights are rounded to half precision before `P·V`, and a weight that sits
//! near a rounding tie flips with the last bit of its score. So our attention adds in
//! ggml's order, not just to its precision (512-bit vectors, the build our golden files
//! come from). ggml has two orders for half-precision products:
//! - one token (decode): `ggml_vec_dot_f16` keeps 4 × 16 lanes, adds the four
//!   accumulators pairwise, then folds the 16 lanes as a tree ([`Order::VecDot`]);
//! - a batch (prefill): llamafile's tiled GEMM keeps one 16-lane accumulator per output,
//!   a fused multiply-add chain, folded by the same tree ([`Order::Tiled`]).
//!
//! The softmax sums each 16 exponentials by the tree into an f64. Every step is one
//! rounding, so any machine reproduces it exactly.

/// Lanes per vector and vectors per step of ggml's 512-bit half-precision dot product.
pub const LANES: usize = 16;

/// Fold 16 lanes as `_mm512_reduce_add_ps` does: halves, then quarters, then pairs.
#[inline]
pub fn reduce16(a: &[f32; LANES]) -> f32 {
    let mut t3 = [0f32; 8];
    for i in 0..8 {
        t3[i] = a[8 + i] + a[i];
    }
    let mut t6 = [0f32; 4];
    for i in 0..4 {
        t6[i] = t3[4 + i] + t3[i];
    }
    (t6[0] + t6[2]) + (t6[1] + t6[3])
}

/// Which of ggml's summation orders to follow.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Order {
    /// `ggml_vec_dot_f16`: four 16-lane accumulators (one-token matmuls).
    VecDot,
    /// llamafile's tiled GEMM: one 16-lane accumulator (matmuls over two or more tokens).
    Tiled,
}

impl Order {
    /// The order ggml uses for a matmul over `tokens` query rows.
    pub fn for_tokens(tokens: usize) -> Self {
        if tokens >= 2 {
            Order::Tiled
        } else {
            Order::VecDot
        }
    }
}

/// `x · y` for half-rounded vectors in ggml's `order` (lengths a multiple of 16; for
/// [`Order::VecDot`] a tail past a multiple of 64 is added in f64, as ggml does). Inlined
/// into its callers so it compiles with their FMA target features.
#[inline(always)]
#[allow(clippy::needless_range_loop)] // the indices spell out ggml's lane layout
pub fn dot_f16(x: &[f32], y: &[f32], order: Order) -> f32 {
    let hd = x.len();
    match order {
        Order::Tiled => {
            let mut acc = [0f32; LANES];
            for c in 0..hd / LANES {
                for l in 0..LANES {
                    acc[l] = x[c * LANES + l].mul_add(y[c * LANES + l], acc[l]);
                }
            }
            reduce16(&acc)
        }
        Order::VecDot => {
            let mut acc = [[0f32; LANES]; 4];
            let np = hd - hd % (4 * LANES);
            for s in (0..np).step_by(4 * LANES) {
                for (j, a) in acc.iter_mut().enumerate() {
                    for l in 0..LANES {
                        let i = s + j * LANES + l;
                        a[l] = x[i].mul_add(y[i], a[l]);
                    }
                }
            }
            let [a0, a1, a2, a3] = acc;
            let folded: [f32; LANES] = std::array::from_fn(|l| (a0[l] + a2[l]) + (a1[l] + a3[l]));
            let mut sum = f64::from(reduce16(&folded));
            for i in np..hd {
                sum += f64::from(x[i] * y[i]);
            }
            sum as f32
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sums_match_plain_sums_closely() {
        let x: Vec<f32> = (0..128).map(|i| (i as f32 * 0.37).sin()).collect();
        let y: Vec<f32> = (0..128).map(|i| (i as f32 * 0.11).cos()).collect();
        let plain: f64 = x.iter().zip(&y).map(|(a, b)| f64::from(*a) * f64::from(*b)).sum();
        for order in [Order::VecDot, Order::Tiled] {
            assert!((f64::from(dot_f16(&x, &y, order)) - plain).abs() < 1e-5);
        }
        let mut lanes = [0f32; 16];
        lanes.iter_mut().enumerate().for_each(|(i, v)| *v = i as f32);
        assert_eq!(reduce16(&lanes), 120.0);
    }
}
