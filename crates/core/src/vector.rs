//! Dense vector arithmetic for the hot loops (search, fusion of embeddings).
//!
//! Written as eight independent accumulators over exact chunks, the shape LLVM turns into
//! SIMD on x86_64 (SSE/AVX), aarch64 and wasm `simd128` without `unsafe` or intrinsics.

/// Dot product of two equally long slices (the shorter length is used otherwise).
#[inline]
pub fn dot(a: &[f32], b: &[f32]) -> f32 {
    let n = a.len().min(b.len());
    let (a, b) = (&a[..n], &b[..n]);
    let mut acc = [0f32; 8];
    let mut ca = a.chunks_exact(8);
    let mut cb = b.chunks_exact(8);
    for (x, y) in (&mut ca).zip(&mut cb) {
        for i in 0..8 {
            acc[i] += x[i] * y[i];
        }
    }
    let mut tail = 0f32;
    for (x, y) in ca.remainder().iter().zip(cb.remainder()) {
        tail += x * y;
    }
    (acc[0] + acc[4]) + (acc[1] + acc[5]) + (acc[2] + acc[6]) + (acc[3] + acc[7]) + tail
}

/// Dot product of two int8 vectors in i32.
#[inline]
pub fn dot_i8(a: &[i8], b: &[i8]) -> i32 {
    let n = a.len().min(b.len());
    let (a, b) = (&a[..n], &b[..n]);
    let mut acc = [0i32; 16];
    let mut ca = a.chunks_exact(16);
    let mut cb = b.chunks_exact(16);
    for (x, y) in (&mut ca).zip(&mut cb) {
        for i in 0..16 {
            acc[i] += i32::from(x[i]) * i32::from(y[i]);
        }
    }
    let mut tail = 0i32;
    for (x, y) in ca.remainder().iter().zip(cb.remainder()) {
        tail += i32::from(*x) * i32::from(*y);
    }
    acc.iter().sum::<i32>() + tail
}

/// Euclidean norm.
pub fn norm(a: &[f32]) -> f32 {
    libm::sqrtf(dot(a, a))
}

/// Scale `a` to unit length in place; a zero vector stays zero. Returns the old norm.
pub fn normalize(a: &mut [f32]) -> f32 {
    let n = norm(a);
    if n > 0.0 && n.is_finite() {
        for x in a.iter_mut() {
            *x /= n;
        }
    }
    n
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dots() {
        let a: alloc::vec::Vec<f32> = (0..19).map(|i| i as f32).collect();
        let naive: f32 = a.iter().map(|x| x * x).sum();
        assert_eq!(dot(&a, &a), naive);
        let b: alloc::vec::Vec<i8> = (0..35).map(|i| (i as i8) - 17).collect();
        let naive: i32 = b.iter().map(|&x| i32::from(x) * i32::from(x)).sum();
        assert_eq!(dot_i8(&b, &b), naive);
        let mut v = [3.0, 4.0];
        assert_eq!(normalize(&mut v), 5.0);
        assert!((norm(&v) - 1.0).abs() < 1e-6);
    }
}
