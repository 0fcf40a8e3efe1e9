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
const ACCS: usize = 4;
/// Elements consumed per step.
pub const STEP: usize = LANES * ACCS;

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

/// 16-lane accumulators fed element by element in ggml's lane order.
#[derive(Clone, Copy)]
pub struct Accumulator {
    acc: [[f32; LANES]; ACCS],
    order: Order,
}

impl Accumulator {
    /// Empty, for `order`.
    pub fn new(order: Order) -> Self {
        Accumulator { acc: [[0.0; LANES]; ACCS], order }
    }

    /// Add `x · y` as element `i` of the vector being dotted.
    #[inline]
    pub fn add(&mut self, i: usize, x: f32, y: f32) {
        let slot = match self.order {
            Order::VecDot => {
                let r = i % STEP;
                &mut self.acc[r / LANES][r % LANES]
            }
            Order::Tiled => &mut self.acc[0][i % LANES],
        };
        *slot = x.mul_add(y, *slot);
    }

    /// The sum: accumulators pairwise (0+2, 1+3, then 0+1), then the lane tree.
    pub fn total(&self) -> f32 {
        if self.order == Order::Tiled {
            return reduce16(&self.acc[0]);
        }
        let [a0, a1, a2, a3] = self.acc;
        let folded: [f32; LANES] = std::array::from_fn(|l| (a0[l] + a2[l]) + (a1[l] + a3[l]));
        reduce16(&folded)
    }
}

/// `x · y` for half-rounded vectors in ggml's `order`. For [`Order::VecDot`], lengths
/// past a multiple of [`STEP`] add their tail in f64 as ggml does (head widths are 64 or
/// 128, so there is none); the tiled order has no tail for multiples of 16.
pub fn dot_f16(x: &[f32], y: &[f32], order: Order) -> f32 {
    let np = match order {
        Order::VecDot => x.len() - x.len() % STEP,
        Order::Tiled => x.len(),
    };
    let mut acc = Accumulator::new(order);
    for i in 0..np {
        acc.add(i, x[i], y[i]);
    }
    let mut sum = f64::from(acc.total());
    for i in np..x.len() {
        sum += f64::from(x[i] * y[i]);
    }
    sum as f32
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
