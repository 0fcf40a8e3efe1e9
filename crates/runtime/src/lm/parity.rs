//! Parity with llama.cpp, measured against a golden file written by
//! `scripts/golden/lm.py`: token ids of a mixed corpus, greedy continuations and top-20
//! log-probabilities of a prompt set, and top-1 next-token agreement over a long text.
//!
//! It lives here, not in a test, because it has two users: the SmolLM2 test in `npm test`,
//! and `docmem bench lm --golden` for the 1.1 GB MemReader-class model, which is a
//! benchmark-time check (its download and four minutes on two cores stay out of CI).

use serde::Serialize;
use serde_json::Value;

use super::{argmax, log_prob, Backend, Lm, Prompt, SamplingParams};
use crate::cpu::transformer::CpuTransformer;
use crate::lm::Logits;
use crate::Error;

/// Greedy continuations must agree for this many tokens (or to the end of llama.cpp's).
pub const GREEDY_TOKENS: usize = 32;
/// Top-1 agreement over the long text must reach this rate.
pub const TOP1_RATE: f64 = 0.99;
/// Top-20 log-probabilities must be within this of llama.cpp's.
pub const TOP20_TOLERANCE: f32 = 0.01;
/// ... or within this, where the golden came from llama.cpp built for AVX2
/// (`"reference_isa": "avx2"`): its half-precision dot products and `exp` add in 256-bit
/// vectors, another order than the 512-bit one docmem follows on every path, and on a
/// model of drawn weights (whose attention is flat and whose head amplifies) a flipped
/// rounding moved a log-probability by up to 0.026 while every greedy token stayed the same.
pub const TOP20_TOLERANCE_AVX2_GOLDEN: f32 = 0.05;

/// One greedy continuation compared.
#[derive(Clone, Debug, Serialize)]
pub struct GreedyCase {
    /// The prompt.
    pub prompt: String,
    /// Leading tokens identical to llama.cpp's.
    pub identical: usize,
    /// Tokens llama.cpp generated (its end-of-generation token excluded).
    pub reference: usize,
}

/// What [`check`] measured.
#[derive(Clone, Debug, Default, Serialize)]
pub struct ParityReport {
    /// Corpus texts whose token ids differ from llama.cpp's.
    pub token_mismatches: Vec<String>,
    /// Prompts whose token ids (BOS included) differ.
    pub prompt_mismatches: Vec<String>,
    /// Each greedy continuation.
    pub greedy: Vec<GreedyCase>,
    /// Largest difference of a top-20 log-probability.
    pub worst_top20: f32,
    /// What that difference must stay under, by the golden's reference build.
    pub top20_tolerance: f32,
    /// Positions of the long text where the argmax agrees.
    pub top1_agree: usize,
    /// Positions compared.
    pub top1_total: usize,
}

impl ParityReport {
    /// Top-1 agreement rate.
    pub fn top1_rate(&self) -> f64 {
        self.top1_agree as f64 / self.top1_total.max(1) as f64
    }

    /// What falls short of the thresholds above; empty when parity holds.
    pub fn failures(&self) -> Vec<String> {
        let mut f: Vec<String> = self.token_mismatches.iter().map(|t| format!("token ids of {t:?} differ")).collect();
        f.extend(self.prompt_mismatches.iter().map(|p| format!("prompt ids of {p:?} differ")));
        for g in &self.greedy {
            if g.identical < GREEDY_TOKENS.min(g.reference) {
                f.push(format!("greedy continuation of {:?} diverges at token {}", g.prompt, g.identical));
            }
        }
        if self.worst_top20 >= self.top20_tolerance {
            f.push(format!("top-20 log-probabilities differ by up to {}", self.worst_top20));
        }
        if self.top1_rate() < TOP1_RATE {
            f.push(format!("top-1 agreement {:.4} < {TOP1_RATE}", self.top1_rate()));
        }
        f
    }
}

/// Why a golden file could not be used.
fn bad(what: &str) -> Error {
    Error::Golden { what: what.to_owned() }
}

fn ids(v: &Value, what: &str) -> Result<Vec<u32>, Error> {
    v.as_array().ok_or_else(|| bad(what))?.iter().map(|x| x.as_u64().and_then(|i| u32::try_from(i).ok()).ok_or_else(|| bad(what))).collect()
}

fn text<'a>(v: &'a Value, what: &str) -> Result<&'a str, Error> {
    v.as_str().ok_or_else(|| bad(what))
}

/// Compare `lm` with llama.cpp's outputs in `golden` (the JSON `scripts/golden/lm.py` writes).
pub fn check(lm: &Lm<CpuTransformer>, golden: &Value) -> Result<ParityReport, Error> {
    check_within(lm, golden, usize::MAX)
}

/// [`check`], with the top-1 comparison over the long text stopped after `top1_positions`
/// positions (tokens, greedy continuations and top-20 are compared in full). For a kernel
/// path many times slower than the others (the portable one, where a fused multiply-add is a
/// software call), whose kernels are checked bit for bit against the SIMD ones elsewhere:
/// the full text there would cost minutes for little more evidence.
pub fn check_within(lm: &Lm<CpuTransformer>, golden: &Value, top1_positions: usize) -> Result<ParityReport, Error> {
    // Goldens without the field were all made by llama.cpp's AVX-512 build.
    let avx2 = golden.get("reference_isa").and_then(Value::as_str) == Some("avx2");
    let mut r = ParityReport { top20_tolerance: if avx2 { TOP20_TOLERANCE_AVX2_GOLDEN } else { TOP20_TOLERANCE }, ..Default::default() };
    for case in golden["tokenize"].as_array().ok_or_else(|| bad("tokenize"))? {
        let t = text(&case["text"], "tokenize.text")?;
        if lm.tokenizer.encode(t)? != ids(&case["ids"], "tokenize.ids")? {
            r.token_mismatches.push(t.to_owned());
        }
    }

    let params = SamplingParams { max_tokens: 40, ..Default::default() };
    for case in golden["greedy"].as_array().ok_or_else(|| bad("greedy"))? {
        let prompt = text(&case["prompt"], "greedy.prompt")?;
        if lm.prompt_tokens(Prompt::Text(prompt))? != ids(&case["prompt_ids"], "greedy.prompt_ids")? {
            r.prompt_mismatches.push(prompt.to_owned());
        }
        let (_, logits) = crate::block_on(lm.next_token_logits(Prompt::Text(prompt)))?;
        for pair in case["top20"].as_array().ok_or_else(|| bad("greedy.top20"))? {
            let (id, want) = (pair[0].as_u64().ok_or_else(|| bad("greedy.top20"))?, pair[1].as_f64().ok_or_else(|| bad("greedy.top20"))?);
            let id = u32::try_from(id).map_err(|_| bad("greedy.top20"))?;
            r.worst_top20 = r.worst_top20.max((log_prob(&logits, id) - want as f32).abs());
        }
        let gen = crate::block_on(lm.generate(Prompt::Text(prompt), &params, |_| std::ops::ControlFlow::Continue(())))?;
        // llama.cpp's list ends with the end-of-generation token when it stopped on one;
        // ours stops before it.
        let want: Vec<u32> =
            ids(&case["continuation"], "greedy.continuation")?.into_iter().filter(|t| !lm.tokenizer.stop_ids().contains(t)).collect();
        let identical = gen.tokens.iter().zip(&want).take_while(|(a, b)| a == b).count();
        r.greedy.push(GreedyCase { prompt: prompt.to_owned(), identical, reference: want.len() });
    }

    let top1 = &golden["top1"];
    let text_ids = ids(&top1["ids"], "top1.ids")?;
    if lm.prompt_tokens(Prompt::Text(text(&top1["text"], "top1.text")?))? != text_ids {
        r.prompt_mismatches.push("the top-1 text".into());
    }
    let want = ids(&top1["argmax"], "top1.argmax")?;
    let text_ids = &text_ids[..text_ids.len().min(top1_positions)];
    let vocab = lm.backend.config().vocab;
    let mut cache = lm.backend.new_cache();
    for (chunk_no, chunk) in text_ids.chunks(256).enumerate() {
        let logits = crate::block_on(Backend::forward(&lm.backend, &mut cache, chunk, Logits::All))?;
        for (i, row) in logits.chunks_exact(vocab).enumerate() {
            if let Some(&w) = want.get(chunk_no * 256 + i) {
                r.top1_agree += usize::from(argmax(row) == w);
                r.top1_total += 1;
            }
        }
    }
    Ok(r)
}
