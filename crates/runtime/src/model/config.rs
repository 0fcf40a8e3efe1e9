//! A decoder's hyper-parameters, read from GGUF metadata (`{arch}.block_count`, …).

use crate::gguf::{GgufFile, MetaValue};
use crate::Error;

/// The decoder families docmem runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Arch {
    /// Llama (SmolLM2, Llama 2/3): RoPE on adjacent pairs (GGUF permutes Q/K for it).
    Llama,
    /// Qwen2 / Qwen2.5 (MemReader): biases on Q/K/V, RoPE on split halves (NeoX).
    Qwen2,
    /// Qwen3: no Q/K/V biases; each head's queries and keys RMS-normed before RoPE (NeoX);
    /// heads may be wider than `n_embd / n_head`.
    Qwen3,
    /// Gemma 3 (its text decoder): embeddings scaled by `√n_embd`, head norms as Qwen3's,
    /// a second RMSNorm after attention and after the feed-forward (before each residual
    /// add), GELU-gated feed-forward, queries scaled before `Q·K`, and most layers
    /// attending over a sliding window with a RoPE of their own ([`SlidingWindow`]).
    Gemma3,
    /// Phi-3 and Phi-4-mini: Q, K and V in one matrix and gate and up in one (split when
    /// loaded), queries scaled before `Q·K`, RoPE (NeoX, partial in Phi-4-mini) with
    /// LongRoPE's per-pair factors and attention factor where the file has them.
    Phi3,
}

/// The feed-forward's gate activation: `act(gate) · up`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Gate {
    /// SiLU (SwiGLU): llama, qwen.
    Silu,
    /// GELU, tanh approximation (GeGLU): gemma.
    GeluTanh,
}

impl Arch {
    /// The `general.architecture` name.
    pub fn name(self) -> &'static str {
        match self {
            Arch::Llama => "llama",
            Arch::Qwen2 => "qwen2",
            Arch::Qwen3 => "qwen3",
            Arch::Gemma3 => "gemma3",
            Arch::Phi3 => "phi3",
        }
    }

    /// The architecture a `general.architecture` name names, if docmem runs it.
    pub fn from_name(name: &str) -> Option<Arch> {
        [Arch::Llama, Arch::Qwen2, Arch::Qwen3, Arch::Gemma3, Arch::Phi3].into_iter().find(|a| a.name() == name)
    }

    /// Whether RoPE rotates the two halves of each head (NeoX) rather than adjacent pairs.
    pub fn rope_neox(self) -> bool {
        matches!(self, Arch::Qwen2 | Arch::Qwen3 | Arch::Gemma3 | Arch::Phi3)
    }

    /// Whether its blocks add biases to Q, K and V.
    pub fn has_qkv_bias(self) -> bool {
        matches!(self, Arch::Qwen2)
    }

    /// Whether each head's queries and keys are RMS-normed before RoPE.
    pub fn has_head_norms(self) -> bool {
        matches!(self, Arch::Qwen3 | Arch::Gemma3)
    }

    /// Whether attention's and the feed-forward's outputs are RMS-normed again before
    /// their residual adds (gemma).
    pub fn has_post_norms(self) -> bool {
        matches!(self, Arch::Gemma3)
    }

    /// The feed-forward's gate activation.
    pub fn gate(self) -> Gate {
        match self {
            Arch::Gemma3 => Gate::GeluTanh,
            _ => Gate::Silu,
        }
    }

    /// Whether the token embeddings are multiplied by `√n_embd` before the first block.
    pub fn scales_embeddings(self) -> bool {
        matches!(self, Arch::Gemma3)
    }

    /// Whether the queries are multiplied by the attention's scale before `Q·K` (rounded
    /// to half precision after it, as llama.cpp's graph does), rather than the scores
    /// after it.
    pub fn prescales_queries(self) -> bool {
        matches!(self, Arch::Gemma3 | Arch::Phi3)
    }

    /// Whether its files may hold Q, K and V as one matrix (`attn_qkv`) and gate and up as
    /// one (`ffn_up`, twice the feed-forward's width, no `ffn_gate`).
    pub fn fuses_projections(self) -> bool {
        matches!(self, Arch::Phi3)
    }
}

/// Sliding-window attention (Gemma 3): the layers it marks attend only to the last `size`
/// positions (their own included), and rotate by a RoPE of their own base, unscaled; the
/// others attend to everything, with the model's RoPE.
#[derive(Clone, Debug, PartialEq)]
pub struct SlidingWindow {
    /// Positions a windowed layer sees.
    pub size: usize,
    /// Per layer, whether it is windowed.
    pub layers: Vec<bool>,
    /// The windowed layers' RoPE base.
    pub rope_base: f32,
}

/// Decoder hyper-parameters.
#[derive(Clone, Debug, PartialEq)]
pub struct ModelConfig {
    /// Family.
    pub arch: Arch,
    /// Transformer blocks.
    pub n_layer: usize,
    /// Hidden width.
    pub n_embd: usize,
    /// Query heads.
    pub n_head: usize,
    /// Key/value heads (GQA: fewer than query heads).
    pub n_head_kv: usize,
    /// Width of one head.
    pub head_dim: usize,
    /// Feed-forward width.
    pub n_ff: usize,
    /// Vocabulary size.
    pub vocab: usize,
    /// Longest context trained.
    pub context_length: usize,
    /// RMSNorm epsilon.
    pub rms_eps: f32,
    /// RoPE frequency base.
    pub rope_base: f32,
    /// Dimensions of each head that RoPE rotates.
    pub rope_dims: usize,
    /// Linear RoPE scaling: every angle multiplied by this (`1 / rope.scaling.factor`; 1
    /// for none). Gemma 3's 4B and larger scale their global layers' RoPE by 1/8.
    pub rope_freq_scale: f32,
    /// Sliding-window layers, where the model has them.
    pub sliding_window: Option<SlidingWindow>,
    /// RoPE's attention factor: every cos and sin multiplied by it (LongRoPE's
    /// `rope.scaling.attn_factor`; 1 for none).
    pub rope_attn_factor: f32,
    /// The context LongRoPE's short factors serve (`rope.scaling.original_context_length`):
    /// a longer context window turns by the long factors, as llama.cpp chooses.
    pub rope_original_context: Option<usize>,
    /// Whether this run's context window is past [`ModelConfig::rope_original_context`]
    /// (set when the window is chosen): LongRoPE's long factors apply.
    pub long_rope: bool,
}

/// The widest head the runtime takes (the GPU attention's limit; the CPU's RoPE table).
pub const MAX_HEAD_DIM: usize = 512;

/// Gemma 3's windowed layers: `attention.sliding_window` positions; the layers marked by
/// `attention.sliding_window_pattern` (an array of flags, or a period `n` whose last layer
/// of each `n` is global; 6 where unsaid, as llama.cpp takes it); RoPE base
/// `rope.freq_base_swa` (10,000 where unsaid). A file without a window attends globally.
fn sliding_window(g: &GgufFile, a: &str, n_layer: usize) -> Result<Option<SlidingWindow>, Error> {
    let Some(size) = g.get(&format!("{a}.attention.sliding_window")).and_then(MetaValue::as_u64).filter(|&w| w > 0) else {
        return Ok(None);
    };
    let key = format!("{a}.attention.sliding_window_pattern");
    let layers = match g.get(&key) {
        Some(MetaValue::Array(flags)) => {
            let flags: Option<Vec<bool>> = flags.iter().map(MetaValue::as_bool).collect();
            flags.filter(|f| f.len() == n_layer).ok_or(Error::BadParam { key: key.clone() })?
        }
        Some(v) => {
            let period = v.as_u64().filter(|&p| p < 1 << 16).ok_or(Error::BadParam { key: key.clone() })? as usize;
            (0..n_layer).map(|l| period == 0 || l % period < period - 1).collect()
        }
        None => (0..n_layer).map(|l| l % 6 < 5).collect(),
    };
    let base_key = format!("{a}.rope.freq_base_swa");
    let rope_base = match g.get(&base_key) {
        None => 10_000.0,
        Some(v) => v.as_f64().map(|x| x as f32).filter(|x| x.is_finite() && *x > 0.0).ok_or(Error::BadParam { key: base_key })?,
    };
    Ok(Some(SlidingWindow { size: size.min(1 << 30) as usize, layers, rope_base }))
}

fn param(g: &GgufFile, arch: &str, key: &str) -> Result<usize, Error> {
    let full = format!("{arch}.{key}");
    g.get(&full).and_then(MetaValue::as_u64).filter(|&v| v > 0 && v < (1 << 24)).map(|v| v as usize).ok_or(Error::BadParam { key: full })
}

impl ModelConfig {
    /// Read the hyper-parameters of a GGUF file.
    pub fn from_gguf(g: &GgufFile) -> Result<Self, Error> {
        let name = g.architecture().unwrap_or("").to_owned();
        let arch = Arch::from_name(&name).ok_or(Error::UnsupportedArch { arch: name })?;
        let a = arch.name();
        let n_embd = param(g, a, "embedding_length")?;
        let n_head = param(g, a, "attention.head_count")?;
        let n_head_kv = param(g, a, "attention.head_count_kv").unwrap_or(n_head);
        // A head's width: `attention.key_length` where the file says it (Qwen3's heads are
        // wider than `n_embd / n_head`), else the hidden width split over the heads.
        let (head_dim, head_key) = match g.get(&format!("{a}.attention.key_length")) {
            Some(_) => (param(g, a, "attention.key_length")?, "attention.key_length"),
            None if n_embd.is_multiple_of(n_head) => (n_embd / n_head, "embedding_length"),
            None => return Err(Error::BadParam { key: format!("{a}.attention.head_count (it does not divide {a}.embedding_length)") }),
        };
        if !n_head.is_multiple_of(n_head_kv) {
            return Err(Error::BadParam { key: format!("{a}.attention.head_count_kv (it does not divide {a}.attention.head_count)") });
        }
        // Even, for RoPE's pairs; at most 512, as the attention kernels take (models have
        // 64 to 256).
        if !head_dim.is_multiple_of(2) || head_dim > MAX_HEAD_DIM {
            return Err(Error::BadParam {
                key: format!("{a}.{head_key} (a head {head_dim} wide; an even width up to {MAX_HEAD_DIM} runs)"),
            });
        }
        // Widths a 32-bit (wasm) address space multiplies safely; real models stay far below.
        if (n_head as u64) * (head_dim as u64) > 1 << 20 {
            return Err(Error::BadParam { key: format!("{a}.attention.head_count ({n_head} heads of {head_dim})") });
        }
        // A scaled RoPE stated as metadata (YaRN's long-context Qwen files, a linear-scaled
        // Llama 2 fine-tune) turns every angle otherwise: refused, never run with plain
        // angles. (Llama 3 states its scaling as the `rope_freqs.weight` tensor, which runs.)
        let scaling = g.get(&format!("{a}.rope.scaling.type")).and_then(MetaValue::as_str).unwrap_or("none");
        let factor = g.get(&format!("{a}.rope.scaling.factor")).and_then(MetaValue::as_f64).unwrap_or(1.0);
        // A linear scaling divides every angle by its factor, which runs; others (YaRN)
        // do not.
        let rope_freq_scale = match scaling {
            "none" => 1.0,
            "linear" if (1.0..=1024.0).contains(&factor) => (1.0 / factor) as f32,
            _ => {
                return Err(Error::ModelConfig {
                    reason: format!("its RoPE is scaled ({a}.rope.scaling.type {scaling}, factor {factor}), which docmem does not run"),
                })
            }
        };
        // Gemma 2's logit soft-capping (and any later model's that states it) changes every
        // logit: refused, never run without it.
        for key in ["final_logit_softcapping", "attn_logit_softcapping"] {
            if g.get(&format!("{a}.{key}")).and_then(MetaValue::as_f64).is_some_and(|c| c != 0.0) {
                return Err(Error::ModelConfig { reason: format!("it soft-caps its logits ({a}.{key}), which docmem does not run") });
            }
        }
        if g.get(&format!("{a}.attention.value_length")).is_some() && param(g, a, "attention.value_length")? != head_dim {
            return Err(Error::BadParam { key: format!("{a}.attention.value_length") });
        }
        let vocab = g
            .tensor(super::tensors::TOKEN_EMBEDDINGS.0)
            .and_then(|t| t.dims.get(1).copied())
            .map(|v| v as usize)
            .ok_or(Error::MissingTensor { name: super::tensors::TOKEN_EMBEDDINGS.0.into() })?;
        let float = |key: &str, default: f32| -> Result<f32, Error> {
            let full = format!("{a}.{key}");
            match g.get(&full) {
                None => Ok(default),
                Some(v) => v.as_f64().map(|x| x as f32).filter(|x| x.is_finite() && *x > 0.0).ok_or(Error::BadParam { key: full }),
            }
        };
        let n_layer = param(g, a, "block_count")?;
        let sliding_window = match arch {
            Arch::Gemma3 => sliding_window(g, a, n_layer)?,
            // Phi-3's files state a window that llama.cpp does not apply (its Phi-3 graph
            // attends to everything): neither does docmem.
            Arch::Phi3 => None,
            _ if g.get(&format!("{a}.attention.sliding_window")).and_then(MetaValue::as_u64).is_some_and(|w| w > 0) => {
                return Err(Error::ModelConfig {
                    reason: format!("its attention slides over a window ({a}.attention.sliding_window), which docmem runs for gemma3 only"),
                })
            }
            _ => None,
        };
        Ok(ModelConfig {
            arch,
            n_layer,
            n_embd,
            n_head,
            n_head_kv,
            head_dim,
            n_ff: param(g, a, "feed_forward_length")?,
            vocab,
            context_length: param(g, a, "context_length").unwrap_or(4096),
            rms_eps: float("attention.layer_norm_rms_epsilon", 1e-5)?,
            rope_base: float("rope.freq_base", 10_000.0)?,
            rope_dims: param(g, a, "rope.dimension_count").unwrap_or(head_dim).min(head_dim),
            rope_freq_scale,
            sliding_window,
            rope_attn_factor: float("rope.scaling.attn_factor", 1.0)?,
            rope_original_context: match g.get(&format!("{a}.rope.scaling.original_context_length")) {
                None => None,
                Some(_) => Some(param(g, a, "rope.scaling.original_context_length")?),
            },
            long_rope: false,
        })
    }

    /// This configuration for a run with a context window of `context` tokens: LongRoPE's
    /// long factors past the original context.
    pub fn for_context(self, context: usize) -> Self {
        let long_rope = self.rope_original_context.is_some_and(|o| context > o);
        ModelConfig { long_rope, ..self }
    }

    /// The factor of each token's embedding row before the first block: `√n_embd` where the
    /// architecture scales them (in f32, as llama.cpp's `sqrtf`), else 1.
    pub fn embedding_scale(&self) -> f32 {
        if self.arch.scales_embeddings() {
            (self.n_embd as f32).sqrt()
        } else {
            1.0
        }
    }

    /// Whether layer `layer` attends over a sliding window.
    pub fn is_windowed(&self, layer: usize) -> bool {
        self.sliding_window.as_ref().is_some_and(|w| w.layers.get(layer).copied().unwrap_or(false))
    }

    /// The positions layer `layer` attends to before the newest: all (`None`), or the
    /// window's size less one.
    pub fn window(&self, layer: usize) -> Option<usize> {
        self.sliding_window.as_ref().filter(|_| self.is_windowed(layer)).map(|w| w.size)
    }

    /// The factor of `Q·K`: `1/√head_dim` (Gemma 3's 1B and 4B say the same; llama.cpp
    /// takes `1/√(n_embd / n_head)` for its 27B alone, which this runtime does not run).
    pub fn attention_scale(&self) -> f32 {
        1.0 / (self.head_dim as f32).sqrt()
    }

    /// Width of the key (and value) vectors of one token: `n_head_kv · head_dim`.
    pub fn kv_width(&self) -> usize {
        self.n_head_kv * self.head_dim
    }

    /// Width of the queries (and of attention's output) of one token: `n_head · head_dim`,
    /// `n_embd` except where heads are wider (Qwen3).
    pub fn q_width(&self) -> usize {
        self.n_head * self.head_dim
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gguf::writer::GgufWriter;
    use crate::source::MemorySource;

    /// A gemma3 header with the keys every decoder has, then `more`.
    fn gemma3(more: impl Fn(GgufWriter) -> GgufWriter) -> Result<ModelConfig, Error> {
        let w = GgufWriter::default()
            .kv_str("general.architecture", "gemma3")
            .kv_u32("gemma3.block_count", 8)
            .kv_u32("gemma3.embedding_length", 64)
            .kv_u32("gemma3.feed_forward_length", 128)
            .kv_u32("gemma3.attention.head_count", 4)
            .kv_u32("gemma3.attention.head_count_kv", 1)
            .kv_u32("gemma3.attention.key_length", 32)
            .kv_u32("gemma3.attention.value_length", 32)
            .kv_f32("gemma3.rope.freq_base", 1e6);
        let bytes = more(w).tensor_with("token_embd.weight", &[64, 10], crate::gguf::GgmlType::F32, |_| {}).build(3);
        ModelConfig::from_gguf(&GgufFile::read(&MemorySource::new(bytes)).unwrap())
    }

    #[test]
    fn gemma3_windows_five_layers_of_six_unless_the_file_says_otherwise() {
        let plain = gemma3(|w| w).unwrap();
        assert_eq!(plain.sliding_window, None, "no window stated: every layer global");
        assert_eq!((plain.embedding_scale(), plain.attention_scale()), (8.0, 1.0 / 32f32.sqrt()));
        assert!(plain.arch.has_post_norms() && plain.arch.has_head_norms() && plain.arch.gate() == Gate::GeluTanh);
        let six = gemma3(|w| w.kv_u32("gemma3.attention.sliding_window", 512)).unwrap();
        let w = six.sliding_window.clone().unwrap();
        assert_eq!((w.size, w.rope_base), (512, 10_000.0));
        assert_eq!(w.layers, [true, true, true, true, true, false, true, true]);
        assert_eq!((six.window(0), six.window(5), six.window(99)), (Some(512), None, None));
        let period =
            gemma3(|w| w.kv_u32("gemma3.attention.sliding_window", 4).kv_u32("gemma3.attention.sliding_window_pattern", 2)).unwrap();
        assert_eq!(period.sliding_window.unwrap().layers, [true, false, true, false, true, false, true, false]);
        let flags = [1, 1, 0, 0, 1, 1, 0, 0];
        let listed = gemma3(|w| {
            w.kv_u32("gemma3.attention.sliding_window", 4)
                .kv_i32_array("gemma3.attention.sliding_window_pattern", &flags)
                .kv_f32("gemma3.rope.freq_base_swa", 5e4)
        })
        .unwrap();
        let w = listed.sliding_window.unwrap();
        assert_eq!((w.layers, w.rope_base), (flags.map(|f| f == 1).to_vec(), 5e4));
        let short =
            gemma3(|w| w.kv_u32("gemma3.attention.sliding_window", 4).kv_i32_array("gemma3.attention.sliding_window_pattern", &[1, 0]));
        assert!(matches!(short, Err(Error::BadParam { key }) if key == "gemma3.attention.sliding_window_pattern"));
    }

    #[test]
    fn a_linear_rope_scaling_runs_and_others_and_soft_capping_are_refused_by_name() {
        let linear = gemma3(|w| w.kv_str("gemma3.rope.scaling.type", "linear").kv_f32("gemma3.rope.scaling.factor", 8.0)).unwrap();
        assert_eq!(linear.rope_freq_scale, 0.125);
        let yarn = gemma3(|w| w.kv_str("gemma3.rope.scaling.type", "yarn").kv_f32("gemma3.rope.scaling.factor", 4.0));
        assert!(matches!(&yarn, Err(Error::ModelConfig { reason }) if reason.contains("gemma3.rope.scaling.type yarn")), "{yarn:?}");
        let capped = gemma3(|w| w.kv_f32("gemma3.final_logit_softcapping", 30.0));
        assert!(matches!(&capped, Err(Error::ModelConfig { reason }) if reason.contains("gemma3.final_logit_softcapping")), "{capped:?}");
    }

    #[test]
    fn phi3_ignores_its_stated_window_and_takes_longrope_by_the_context_window() {
        let bytes = GgufWriter::default()
            .kv_str("general.architecture", "phi3")
            .kv_u32("phi3.block_count", 2)
            .kv_u32("phi3.embedding_length", 64)
            .kv_u32("phi3.feed_forward_length", 128)
            .kv_u32("phi3.attention.head_count", 4)
            .kv_u32("phi3.rope.dimension_count", 12)
            .kv_u32("phi3.attention.sliding_window", 2047)
            .kv_u32("phi3.rope.scaling.original_context_length", 4096)
            .kv_f32("phi3.rope.scaling.attn_factor", 1.19)
            .tensor_with("token_embd.weight", &[64, 10], crate::gguf::GgmlType::F32, |_| {})
            .build(3);
        let cfg = ModelConfig::from_gguf(&GgufFile::read(&MemorySource::new(bytes)).unwrap()).unwrap();
        assert_eq!((cfg.sliding_window.clone(), cfg.rope_dims, cfg.rope_attn_factor), (None, 12, 1.19));
        assert!(cfg.arch.fuses_projections() && cfg.arch.prescales_queries() && cfg.arch.rope_neox());
        assert!(!cfg.clone().for_context(4096).long_rope && cfg.for_context(4097).long_rope);
    }
}
