//! The kernel checks ([`super::checks`]) on whatever adapter wgpu finds natively (here
//! Vulkan on llvmpipe, from Debian's `mesa-vulkan-drivers`, which `scripts/setup.sh`
//! installs), one test per check, plus the errors for bad shapes and types. The same
//! checks run in headless Chromium on SwiftShader when the app starts on WebGPU
//! (`tests/browser/app.test.mjs`).

use super::*;
use crate::gguf::GgmlType;
use crate::testdata::weight_row;
use crate::Error;

fn gpu() -> Gpu {
    gpu_with(GpuOptions::default())
}

fn gpu_with(options: GpuOptions) -> Gpu {
    match Gpu::new_blocking(&GpuOptions { allow_cpu_adapter: true, ..options }) {
        Ok(g) => g,
        Err(e) => panic!("{e}: the GPU tests need a Vulkan driver (Debian's mesa-vulkan-drivers; scripts/setup.sh installs it)"),
    }
}

/// One `#[test]` per named check; a failure prints the check, the index and both values.
macro_rules! kernel_checks {
    ($($test:ident => $check:literal),* $(,)?) => {$(
        #[test]
        fn $test() {
            if let Err(e) = pollster::block_on(checks::run(&gpu(), $check)) {
                panic!("{e}");
            }
        }
    )*};
}

kernel_checks! {
    matvec_kernels_match_the_cpu_reference => "matvec",
    k_quant_matvec_kernels_match_the_cpu_reference => "matvec_k_quants",
    activations_quantize_exactly_as_on_the_cpu => "quantize_q8",
    a_matrix_larger_than_a_binding_is_split_by_rows => "split_matrix",
    rms_norm_matches_the_cpu_reference => "rms_norm",
    rope_matches_the_cpu_reference => "rope",
    elementwise_kernels_match_the_cpu_reference => "elementwise",
    attention_over_the_cache_matches_a_plain_reference => "attention",
    argmax_picks_the_first_largest_value => "argmax",
    sampling_draws_what_the_cpu_sampler_draws => "sample",
    the_encoder_kernels_match_the_cpu_encoder => "encoder",
    fused_kernels_match_the_steps_they_replace => "fused",
}

#[test]
fn every_check_is_reachable_by_name_and_an_unknown_name_is_an_error() {
    let gpu = gpu();
    assert_eq!(checks::CHECKS.len(), 12);
    assert!(pollster::block_on(checks::run(&gpu, "no such check")).is_err());
}

/// Kernels are compiled when first dispatched, and the checks dispatch every one this
/// device can run: a kernel added to the registry without a check that runs it fails here.
#[test]
fn no_kernel_is_compiled_before_it_is_needed_and_the_checks_reach_every_one() {
    let gpu = gpu();
    assert!(gpu.has_f16(), "llvmpipe's shader-f16 is enabled: the f16 path's kernels run");
    let (compiled, to_run) = gpu.kernels().coverage();
    assert!(compiled.is_empty(), "{compiled:?}");
    assert_eq!(to_run.len(), registry::KERNELS.len() - 7, "all but the f32 path's K-quant kernels: {to_run:?}");
    assert_eq!(pollster::block_on(checks::run_all(&gpu)).unwrap(), checks::CHECKS.len());
    let (compiled, unchecked) = gpu.kernels().coverage();
    assert_eq!(unchecked, Vec::<&str>::new(), "kernels that no check ran");
    assert_eq!(compiled, to_run);
}

#[test]
fn shapes_and_types_are_checked() {
    let gpu = gpu();
    let k = Kernels::new(&gpu);
    // Every type the CPU reads uploads; a row that is not whole 32-value blocks does not.
    for ty in crate::gguf::GgmlType::ALL {
        let data = weight_row(ty, 256, 1);
        assert!(GpuMatrix::upload(&gpu, ty, 1, 256, &data).is_ok(), "{ty:?}");
    }
    let data = weight_row(GgmlType::F16, 48, 1);
    assert!(matches!(GpuMatrix::upload(&gpu, GgmlType::F16, 1, 48, &data), Err(Error::GpuShape { what: "matrix row", .. })));
    let data = weight_row(GgmlType::Q8_0, 64, 1);
    assert!(matches!(GpuMatrix::upload(&gpu, GgmlType::Q8_0, 2, 64, &data), Err(Error::GpuShape { what: "matrix data (bytes)", .. })));
    let w = GpuMatrix::upload(&gpu, GgmlType::Q8_0, 1, 64, &data).unwrap();
    let (x, y) = (GpuVector::zeros(&gpu, 63), GpuVector::zeros(&gpu, 1));
    let err = k.run(&gpu, |enc| k.matvec(&gpu, enc, &w, &x, 1, &y)).unwrap_err();
    // Q8_0 reads the 64 values quantized: 64 q values and 2 (d, s) pairs.
    assert!(matches!(err, Error::GpuShape { what: "matvec input", expected: 68, got: 63 }), "{err}");
    assert!(err.to_string().contains("63 elements where 68 are needed"), "{err}");
}

#[test]
fn profiling_times_each_kernel_by_name_and_resets() {
    let timed = match Gpu::new_blocking(&GpuOptions { allow_cpu_adapter: true, profile: true, ..GpuOptions::default() }) {
        Ok(g) => g,
        Err(e) => panic!("{e}"),
    };
    assert!(timed.is_profiling(), "llvmpipe offers timestamp queries");
    pollster::block_on(checks::run(&timed, "rms_norm")).unwrap();
    pollster::block_on(checks::run(&timed, "argmax")).unwrap();
    let (times, untimed) = timed.kernel_times().unwrap();
    assert_eq!(untimed, 0);
    let names: Vec<&str> = times.iter().map(|t| t.kernel.as_str()).collect();
    assert!(names.contains(&"rms_norm") && names.contains(&"argmax"), "{names:?}");
    assert!(times.iter().all(|t| t.dispatches > 0 && t.seconds.is_finite() && t.seconds >= 0.0), "{times:?}");
    timed.reset_kernel_times();
    assert!(timed.kernel_times().unwrap().0.is_empty());
    // Without the option, nothing is timed.
    assert!(gpu().kernel_times().is_none());
}

/// The matrix checks on a device made with `options`.
fn matrix_checks_on(options: GpuOptions) -> Gpu {
    let device = match Gpu::new_blocking(&GpuOptions { allow_cpu_adapter: true, ..options }) {
        Ok(g) => g,
        Err(e) => panic!("{e}"),
    };
    for check in ["matvec", "matvec_k_quants", "split_matrix", "fused"] {
        if let Err(e) = pollster::block_on(checks::run(&device, check)) {
            panic!("{e}");
        }
    }
    device
}

/// llvmpipe is a software adapter, so the checks above run the matrix × vector kernel in
/// its shape for those (a row an invocation); here the same checks run a GPU's (a row a
/// workgroup), and both shapes give the same bits, on both paths.
#[test]
fn the_matrix_kernel_in_a_gpus_shape_matches_the_cpu_reference_and_the_other_shape() {
    for avoid_f16 in [false, true] {
        let software = gpu_with(GpuOptions { avoid_f16, ..GpuOptions::default() });
        let shaped = matrix_checks_on(GpuOptions { avoid_f16, gpu_kernels: true, ..GpuOptions::default() });
        assert!(!software.runs_gpu_kernels() && shaped.runs_gpu_kernels());
        for (ty, cols, tokens) in [
            (GgmlType::Q4K, 1536, 3),
            (GgmlType::Q6K, 512, 1),
            (GgmlType::Q8_0, 2048, 8),
            (GgmlType::Q4_1, 512, 5),
            (GgmlType::F32, 256, 2),
            (GgmlType::Q8_0, 576, 5),
            (GgmlType::Q5K, 512, 3),
            (GgmlType::Q5_0, 256, 2),
            (GgmlType::BF16, 256, 3),
        ] {
            let rows = 70;
            let data: Vec<u8> = if ty == GgmlType::F32 {
                crate::testdata::activations(rows * cols, 9).iter().flat_map(|v| v.to_le_bytes()).collect()
            } else {
                (0..rows).flat_map(|r| weight_row(ty, cols, 100 + r as u64)).collect()
            };
            let x = crate::testdata::activations(tokens * cols, 3);
            let product = |g: &Gpu| {
                let w = GpuMatrix::upload(g, ty, rows, cols, &data).unwrap();
                pollster::block_on(checks::gpu_product(g, &g.kernels(), &w, &x, tokens)).unwrap()
            };
            let (a, b) = (product(&software), product(&shaped));
            let differ = a.iter().zip(&b).filter(|(x, y)| x.to_bits() != y.to_bits()).count();
            assert_eq!(differ, 0, "{ty:?} {rows}×{cols}, {tokens} tokens, f16 path {}: {differ} values differ", !avoid_f16);
        }
    }
}

/// llvmpipe offers `shader-f16`, so the checks above run the K-quants' f16 path (f16
/// products of activations packed by `activations_f16.wgsl`); here the same checks run the
/// f32 path, as on an adapter without `shader-f16` (SwiftShader in the browser test, say).
#[test]
fn the_k_quant_kernels_on_the_f32_path_match_the_cpu_reference_too() {
    let default = gpu();
    assert!(default.has_f16(), "llvmpipe's shader-f16 is enabled");
    let k = default.kernels();
    assert_eq!((k.input(GgmlType::Q4K), k.input(GgmlType::Q6K), k.input(GgmlType::Q8_0)), (Input::F16, Input::F16, Input::Q8));
    let plain = matrix_checks_on(GpuOptions { avoid_f16: true, ..GpuOptions::default() });
    assert!(!plain.has_f16());
    let k = plain.kernels();
    assert_eq!((k.input(GgmlType::Q4K), k.input(GgmlType::Q6K)), (Input::F32, Input::F32));
    // The matrix checks reached the f32 path's K-quant kernels, and no f16 one.
    let (compiled, _) = k.coverage();
    assert!(
        compiled.contains(&"matvec_q4_k")
            && compiled.contains(&"matvec_q5_k")
            && compiled.contains(&"matmul_q5_k")
            && compiled.contains(&"matvec_q6_k")
            && compiled.contains(&"matvec_q4_k_q6_k")
            && compiled.contains(&"matmul_q4_k")
            && compiled.contains(&"matmul_q6_k")
            && !compiled.iter().any(|n| n.ends_with("f16")),
        "{compiled:?}"
    );
    // Without the feature, the f16 step is refused, not run.
    let (x, h) = (GpuVector::zeros(&plain, 32), GpuVector::zeros(&plain, f16_len(32)));
    let refused = k.run(&plain, |enc| k.activations_f16(&plain, enc, &x, &h));
    assert!(matches!(refused, Err(Error::MissingFeature { feature: "shader-f16" })), "{refused:?}");
}

#[test]
fn a_matrix_streamed_in_runs_of_rows_computes_what_an_uploaded_one_does() {
    let gpu = gpu();
    let k = Kernels::new(&gpu);
    // F32 as the file stores it; Q6_K re-laid from 210-byte blocks to 212.
    for (ty, file_row, gpu_row) in [(GgmlType::F32, 512 * 4, 512 * 4), (GgmlType::Q6K, 2 * 210, 2 * 212)] {
        let (rows, cols) = (23, 512);
        let data = weight_row(ty, rows * cols, 5);
        let whole = GpuMatrix::upload(&gpu, ty, rows, cols, &data).unwrap();
        let mut runs = Vec::new();
        // Runs of three rows, parts of five: neither divides 23.
        let streamed = GpuMatrix::upload_rows(&gpu, (ty, rows, cols), data.len(), (5 * gpu_row, 3 * file_row), |at, len, run| {
            runs.push(len);
            run.extend_from_slice(&data[at..at + len]);
            Ok::<(), Error>(())
        })
        .unwrap();
        assert!(runs.iter().all(|&len| len <= 3 * file_row), "{ty:?}: runs {runs:?}");
        assert_eq!(runs.iter().sum::<usize>(), data.len());
        assert_eq!(streamed.parts.len(), 5, "{ty:?}: parts of five rows");
        let x = GpuVector::from_slice(&gpu, &crate::testdata::activations(cols, 6));
        let (q8, f16) = (GpuVector::zeros(&gpu, q8_len(cols)), GpuVector::zeros(&gpu, f16_len(cols)));
        let x = Operand { f32: &x, q8: &q8, f16: &f16 };
        let (a, b) = (GpuVector::zeros(&gpu, rows), GpuVector::zeros(&gpu, rows));
        k.run(&gpu, |enc| {
            k.prepare(&gpu, enc, x, &[ty])?;
            k.product(&gpu, enc, &whole, x, 1, &a)?;
            k.product(&gpu, enc, &streamed, x, 1, &b)
        })
        .unwrap();
        let (a, b) = (pollster::block_on(a.read(&gpu)).unwrap(), pollster::block_on(b.read(&gpu)).unwrap());
        assert_eq!(a, b, "{ty:?}");
        // A reader that returns fewer bytes than asked is an error, not a short matrix.
        let short = GpuMatrix::upload_rows(&gpu, (ty, rows, cols), data.len(), (usize::MAX, 3 * file_row), |at, len, run| {
            run.extend_from_slice(&data[at..at + len - 1]);
            Ok::<(), Error>(())
        });
        assert!(matches!(short, Err(Error::GpuShape { what: "matrix rows read", .. })));
    }
}
