//! What a model file is, read from its GGUF header alone, before any weight is loaded: its
//! architecture and whether docmem runs it (with the reason where not), its size in
//! parameters and bytes, its block formats, and the memory a run with a given context
//! needs. The page shows this for a file the user chose, and refuses there and then a
//! file it cannot run (an architecture it does not know, or a model that does not fit the
//! CPU's memory) instead of reading gigabytes first; `docmem models info` prints it.

use serde::Serialize;

use super::config::ModelConfig;
use crate::gguf::GgufFile;

/// A wasm32 module's linear memory tops out at 4 GiB: a model run on the CPU in a page (the
/// weights and the key/value cache in the wasm heap) must fit in it, with room left for the
/// library, the embedder and the engine's own buffers.
pub const WASM_HEAP_BYTES: u64 = 4 << 30;

/// Of [`WASM_HEAP_BYTES`], what a CPU model may take (the rest: the embedder, the library,
/// the allocator's slack).
pub const WASM_MODEL_BYTES: u64 = 3 << 30;

/// A model file, as its header describes it.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ModelFacts {
    /// `general.architecture` (empty where the file names none).
    pub architecture: String,
    /// `general.name`, where the file has one.
    pub name: Option<String>,
    /// Why docmem cannot run it (an unknown architecture, a malformed hyper-parameter);
    /// `None` when it can.
    pub refusal: Option<String>,
    /// Weights (elements of every tensor).
    pub parameters: u64,
    /// Bytes of tensor data.
    pub weight_bytes: u64,
    /// Block formats by the bytes of tensor data each holds, largest first (`Q4_K`, …).
    pub formats: Vec<(String, u64)>,
    /// Transformer blocks (a supported model).
    pub layers: Option<usize>,
    /// Longest context trained (a supported model).
    pub context_length: Option<usize>,
    /// Bytes the CPU's key/value cache takes per token of context (f32 keys and values,
    /// every layer; a supported model).
    pub cache_bytes_per_token: Option<u64>,
}

impl ModelFacts {
    /// The facts of the GGUF file whose header is `g`.
    pub fn of_gguf(g: &GgufFile) -> Self {
        let config = ModelConfig::from_gguf(g);
        let mut formats: Vec<(String, u64)> = Vec::new();
        for t in &g.tensors {
            let name = t.ggml_type.name().to_owned();
            match formats.iter_mut().find(|(f, _)| *f == name) {
                Some((_, bytes)) => *bytes = bytes.saturating_add(t.size),
                None => formats.push((name, t.size)),
            }
        }
        formats.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
        let cfg = config.as_ref().ok();
        ModelFacts {
            architecture: g.architecture().unwrap_or("").to_owned(),
            name: g.get("general.name").and_then(|v| v.as_str()).map(str::to_owned),
            refusal: config.as_ref().err().map(ToString::to_string),
            parameters: g.tensors.iter().map(|t| t.dims.iter().fold(1u64, |n, &d| n.saturating_mul(d))).fold(0, u64::saturating_add),
            weight_bytes: g.tensors.iter().map(|t| t.size).fold(0, u64::saturating_add),
            formats,
            layers: cfg.map(|c| c.n_layer),
            context_length: cfg.map(|c| c.context_length),
            cache_bytes_per_token: cfg.map(|c| 2 * (c.n_layer as u64).saturating_mul(c.kv_width() as u64) * 4),
        }
    }

    /// Whether docmem runs it.
    pub fn supported(&self) -> bool {
        self.refusal.is_none()
    }

    /// Bytes a CPU run with `context` tokens takes: the weights and the key/value cache
    /// (`None` for a model docmem does not run).
    pub fn cpu_bytes(&self, context: usize) -> Option<u64> {
        self.cache_bytes_per_token.map(|per| self.weight_bytes.saturating_add(per.saturating_mul(context as u64)))
    }

    /// Why it cannot run on the CPU in a page with `context` tokens, if it cannot: its
    /// weights and cache past what a wasm module's memory leaves a model
    /// ([`WASM_MODEL_BYTES`]). Such a model runs only where a GPU takes its weights.
    pub fn too_big_for_wasm_cpu(&self, context: usize) -> Option<String> {
        let need = self.cpu_bytes(context)?;
        (need > WASM_MODEL_BYTES).then(|| {
            format!(
                "it needs about {} to run on the CPU with {context} tokens of context, more than a page's {} (a page's memory tops out at 4 GB); on a GPU its weights live in the GPU's memory",
                gigabytes(need),
                gigabytes(WASM_MODEL_BYTES)
            )
        })
    }

    /// One line for a person: `qwen3 · 751M parameters · Q4_K, Q6_K · 480 MB · about 1.3 GB
    /// to run with 8192 tokens of context on the CPU`, or why it is refused.
    pub fn describe(&self, context: usize) -> String {
        let arch = if self.architecture.is_empty() { "no architecture named" } else { &self.architecture };
        let formats: Vec<&str> = self.formats.iter().take(3).map(|(f, _)| f.as_str()).collect();
        let mut parts = vec![arch.to_owned()];
        if self.parameters > 0 {
            parts.extend([format!("{} parameters", count(self.parameters)), formats.join(", "), gigabytes(self.weight_bytes)]);
        }
        let head = parts.join(" · ");
        match (&self.refusal, self.cpu_bytes(context)) {
            (Some(why), _) => format!("{head}: not supported ({why})"),
            (None, Some(need)) => format!("{head} · about {} to run with {context} tokens of context on the CPU", gigabytes(need)),
            (None, None) => head,
        }
    }
}

/// `8.0B`, `751M`, `1.7M`, `12345`.
fn count(n: u64) -> String {
    match n {
        n if n >= 1_000_000_000 => format!("{:.1}B", n as f64 / 1e9),
        n if n >= 100_000_000 => format!("{:.0}M", n as f64 / 1e6),
        n if n >= 1_000_000 => format!("{:.1}M", n as f64 / 1e6),
        n => n.to_string(),
    }
}

/// `1.3 GB`, `480 MB`, `12 KB` (decimal units, as file sizes are shown).
fn gigabytes(bytes: u64) -> String {
    let b = bytes as f64;
    if b >= 1e9 {
        format!("{:.1} GB", b / 1e9)
    } else if b >= 1e6 {
        format!("{:.0} MB", b / 1e6)
    } else {
        format!("{:.0} KB", b / 1e3)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gguf::writer::GgufWriter;
    use crate::source::MemorySource;
    use crate::synthetic::{decoder_gguf, decoder_tensors, DecoderSpec};

    fn facts_of(bytes: Vec<u8>) -> ModelFacts {
        ModelFacts::of_gguf(&GgufFile::read(&MemorySource::new(bytes)).unwrap())
    }

    #[test]
    fn a_supported_models_facts_are_its_headers() {
        let spec: DecoderSpec = "qwen3-tiny:q4_k_m".parse().unwrap();
        let facts = facts_of(decoder_gguf(spec.shape, spec.quant, 1));
        let plan = decoder_tensors(spec.shape, spec.quant);
        assert_eq!(facts.architecture, "qwen3");
        assert!(facts.supported(), "{:?}", facts.refusal);
        assert_eq!(facts.parameters, plan.iter().map(|t| t.dims.iter().product::<u64>()).sum::<u64>());
        assert_eq!(facts.weight_bytes, plan.iter().map(|t| t.bytes()).sum::<u64>());
        assert_eq!(facts.formats[0].0, "Q4_K", "most of its bytes: {:?}", facts.formats);
        assert_eq!(facts.formats.iter().map(|f| f.1).sum::<u64>(), facts.weight_bytes);
        // Two layers, two key/value heads of 128: 2 × 2 × 256 × 4 bytes a token.
        assert_eq!(facts.cache_bytes_per_token, Some(4096));
        assert_eq!(facts.cpu_bytes(100), Some(facts.weight_bytes + 409_600));
        assert_eq!(facts.too_big_for_wasm_cpu(2048), None);
        let line = facts.describe(2048);
        assert!(line.starts_with("qwen3 · ") && line.contains("to run with 2048 tokens of context"), "{line}");
    }

    #[test]
    fn an_unknown_architecture_is_refused_by_name_before_any_weight_is_read() {
        let bytes = GgufWriter::default()
            .kv_str("general.architecture", "mamba")
            .kv_str("general.name", "Mamba 130M")
            .tensor_with("token_embd.weight", &[32, 4], crate::gguf::GgmlType::F32, |_| {})
            .build(3);
        let facts = facts_of(bytes);
        assert!(!facts.supported());
        assert_eq!((facts.architecture.as_str(), facts.name.as_deref(), facts.parameters), ("mamba", Some("Mamba 130M"), 128));
        assert!(facts.refusal.as_deref().unwrap().contains("'mamba' is not supported"), "{:?}", facts.refusal);
        assert_eq!((facts.cpu_bytes(10), facts.too_big_for_wasm_cpu(10)), (None, None));
        assert!(facts.describe(10).contains("not supported"), "{}", facts.describe(10));
    }

    #[test]
    fn a_rope_scaled_by_metadata_or_a_head_too_wide_is_refused() {
        let header = |extra: &dyn Fn(GgufWriter) -> GgufWriter| {
            let w = GgufWriter::default()
                .kv_str("general.architecture", "qwen3")
                .kv_u32("qwen3.embedding_length", 256)
                .kv_u32("qwen3.attention.head_count", 4)
                .kv_u32("qwen3.block_count", 1)
                .kv_u32("qwen3.feed_forward_length", 512);
            facts_of(extra(w).tensor_with("token_embd.weight", &[256, 4], crate::gguf::GgmlType::F32, |_| {}).build(3))
        };
        assert_eq!(header(&|w| w).refusal, None);
        assert_eq!(header(&|w| w.kv_str("qwen3.rope.scaling.type", "none")).refusal, None);
        let yarn = header(&|w| w.kv_str("qwen3.rope.scaling.type", "yarn").kv_f32("qwen3.rope.scaling.factor", 4.0));
        assert!(yarn.refusal.as_deref().is_some_and(|r| r.contains("RoPE is scaled") && r.contains("yarn")), "{:?}", yarn.refusal);
        let wide = header(&|w| w.kv_u32("qwen3.attention.key_length", 1024));
        assert!(wide.refusal.as_deref().is_some_and(|r| r.contains("key_length")), "{:?}", wide.refusal);
        let odd = header(&|w| w.kv_u32("qwen3.attention.key_length", 63));
        assert!(odd.refusal.is_some());
    }

    #[test]
    fn an_8b_does_not_fit_a_pages_cpu_and_says_so() {
        let spec: DecoderSpec = "llama3-8b:q4_k_m".parse().unwrap();
        let tensors = decoder_tensors(spec.shape, spec.quant);
        let weight_bytes: u64 = tensors.iter().map(|t| t.bytes()).sum();
        // The 8B's header without its 4.6 GB of data: the facts need only the header.
        let facts = ModelFacts {
            architecture: "llama".into(),
            name: None,
            refusal: None,
            parameters: 8_000_000_000,
            weight_bytes,
            formats: vec![("Q4_K".into(), weight_bytes)],
            layers: Some(32),
            context_length: Some(131_072),
            cache_bytes_per_token: Some(2 * 32 * 1024 * 4),
        };
        let why = facts.too_big_for_wasm_cpu(8192).expect("an 8B Q4_K_M is past a page's memory");
        assert!(why.contains("GPU"), "{why}");
    }
}
