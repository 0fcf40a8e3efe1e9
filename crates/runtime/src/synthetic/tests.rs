use super::*;
use crate::gguf::{GgmlType, GgufFile};
use crate::source::MemorySource;

#[test]
fn specifications_name_a_model_and_a_quantization_and_errors_say_what_is_known() {
    let spec: DecoderSpec = "qwen2-1.5b:q4_k_m".parse().unwrap();
    assert_eq!((spec.shape.name, spec.quant), ("qwen2-1.5b", Quant::Q4KM));
    assert_eq!(spec.to_string(), "qwen2-1.5b:q4_k_m");
    assert_eq!("LLAMA-135M:Q4_1".parse::<DecoderSpec>().unwrap().quant, Quant::Q4_1);
    assert!(matches!("qwen2-1.5b".parse::<DecoderSpec>(), Err(Error::BadSpec { .. })));
    let unknown = "gpt-9:q4_k_m".parse::<DecoderSpec>().unwrap_err();
    assert!(unknown.to_string().contains("qwen2-1.5b") && unknown.to_string().contains("gpt-9"), "{unknown}");
    let quant = "qwen2-1.5b:q2_k".parse::<DecoderSpec>().unwrap_err();
    assert!(quant.to_string().contains("q4_k_m") && quant.to_string().contains("q2_k"), "{quant}");
    assert_eq!(embedder_shape("minilm").unwrap().hidden, 384);
    assert!(embedder_shape("nope").unwrap_err().to_string().contains("minilm"));
}

/// The Q6_K tensors of the real Qwen2.5-Coder-1.5B-Instruct Q4_K_M file (read from its
/// header, the file `docmem models fetch bench` fetches): the output head and these
/// layers' `attn_v` and `ffn_down`; every other matrix is Q4_K.
const REAL_Q6_K_LAYERS: [u32; 14] = [0, 1, 5, 6, 7, 8, 9, 10, 13, 16, 19, 21, 24, 27];

#[test]
fn the_1_5b_q4_k_m_plan_has_the_real_files_types_and_shapes() {
    let spec: DecoderSpec = "qwen2-1.5b:q4_k_m".parse().unwrap();
    let plan = decoder_tensors(spec.shape, spec.quant);
    // 2 head tensors, the final norm, 12 per layer (norms, 7 matrices, 3 biases).
    assert_eq!(plan.len(), 3 + 28 * 12);
    let ty = |name: &str| plan.iter().find(|t| t.name == name).map(|t| (t.ty, t.dims.clone())).unwrap();
    assert_eq!(ty("output.weight"), (GgmlType::Q6K, vec![1536, 151_936]));
    assert_eq!(ty("token_embd.weight"), (GgmlType::Q4K, vec![1536, 151_936]));
    assert_eq!(ty("blk.0.attn_k.bias"), (GgmlType::F32, vec![256]));
    assert_eq!(ty("blk.3.ffn_down.weight"), (GgmlType::Q4K, vec![8960, 1536]));
    for layer in 0..28 {
        let want = if REAL_Q6_K_LAYERS.contains(&layer) { GgmlType::Q6K } else { GgmlType::Q4K };
        for part in ["attn_v", "ffn_down"] {
            assert_eq!(ty(&format!("blk.{layer}.{part}.weight")).0, want, "layer {layer} {part}");
        }
        for part in ["attn_q", "attn_k", "attn_output", "ffn_gate", "ffn_up"] {
            assert_eq!(ty(&format!("blk.{layer}.{part}.weight")).0, GgmlType::Q4K, "layer {layer} {part}");
        }
    }
    // The real file's size, 1,117,320,736 bytes, less its metadata (the vocabulary and
    // merges, about 7 MB): the tensor data is within 1% of it.
    let bytes: u64 = plan.iter().map(PlannedTensor::bytes).sum();
    assert!((1_095_000_000..1_112_000_000).contains(&bytes), "{bytes}");
    // A row that is not whole K-quant blocks takes llama.cpp's fallback (SmolLM2's 576):
    // Q5_0 for Q4_K, Q8_0 for Q6_K (the tied output head), Q5_1 for Q5_K.
    let small = decoder_tensors(&DECODERS[4], Quant::Q4KM);
    let ty = |plan: &[PlannedTensor], name: &str| plan.iter().find(|t| t.name == name).unwrap().ty;
    assert!(small.iter().filter(|t| t.dims.len() == 2).all(|t| matches!(t.ty, GgmlType::Q5_0 | GgmlType::Q8_0) || t.dims[0] % 256 == 0));
    assert_eq!(ty(&small, "blk.0.ffn_down.weight"), GgmlType::Q6K);
    assert_eq!(ty(&small, "blk.1.attn_q.weight"), GgmlType::Q5_0);
    assert_eq!(ty(&small, "token_embd.weight"), GgmlType::Q8_0);
    assert_eq!(ty(&decoder_tensors(&DECODERS[4], Quant::Q5KM), "blk.1.attn_q.weight"), GgmlType::Q5_1);
}

#[test]
fn a_synthetic_file_reads_back_with_the_planned_tensors_and_is_the_same_for_a_seed() {
    for spec in ["qwen2-tiny:q4_k_m", "llama-tiny:q4_1", "qwen2-tiny:q8_0"] {
        let spec: DecoderSpec = spec.parse().unwrap();
        let bytes = decoder_gguf(spec.shape, spec.quant, 7);
        assert_eq!(bytes, decoder_gguf(spec.shape, spec.quant, 7), "{spec}: seeded");
        assert_ne!(bytes, decoder_gguf(spec.shape, spec.quant, 8), "{spec}: another seed, other values");
        let src = MemorySource::new(bytes);
        let file = GgufFile::read(&src).unwrap();
        let plan = decoder_tensors(spec.shape, spec.quant);
        assert_eq!(file.tensors.len(), plan.len());
        for (t, p) in file.tensors.iter().zip(&plan) {
            assert_eq!((&t.name, &t.dims, t.ggml_type, t.size), (&p.name, &p.dims, p.ty, p.bytes()), "{spec}");
            // Every value is finite: dequantize and look.
            let data = file.tensor_bytes(&src, t).unwrap();
            let mut values = Vec::new();
            crate::quant::dequantize(t.ggml_type, &data, &mut values).unwrap();
            assert!(values.iter().all(|v| v.is_finite()), "{spec} {}", t.name);
            if t.dims.len() == 2 {
                let std = (values.iter().map(|v| v * v).sum::<f32>() / values.len() as f32).sqrt();
                assert!((p.std * 0.5..p.std * 2.0).contains(&std), "{spec} {}: standard deviation {std}, planned {}", t.name, p.std);
            }
        }
    }
}
