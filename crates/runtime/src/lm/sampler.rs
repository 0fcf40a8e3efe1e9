//! Choosing the next token from logits: repetition penalty, top-k, temperature, top-p,
//! then a draw from a seeded generator (the same seed gives the same text). Temperature 0
//! is greedy (argmax; ties to the lowest id, as llama.cpp).

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use serde::{Deserialize, Serialize};

/// How to pick tokens.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct SamplingParams {
    /// Softmax temperature; 0 picks the most likely token.
    pub temperature: f32,
    /// Keep the smallest set of tokens whose probability reaches this (1 = all).
    pub top_p: f32,
    /// Keep this many most likely tokens (0 = all).
    pub top_k: usize,
    /// Divide positive logits (multiply negative ones) of recently seen tokens by this.
    pub repetition_penalty: f32,
    /// How many recent tokens the penalty looks at.
    pub repetition_window: usize,
    /// Random seed.
    pub seed: u64,
    /// Most tokens to generate.
    pub max_tokens: usize,
    /// Stop when the output ends with one of these (not included in the output).
    pub stop: Vec<String>,
    /// Tokens the first pick may not be (an answerer that must not open with its refusal;
    /// later picks are free).
    pub first_token_banned: Vec<u32>,
    /// What the text must open with: a reply that has not shown it by then ends there
    /// ([`super::Finish::OffFormat`]). Set by callers in code (a reader's format), not
    /// in settings files.
    #[serde(skip)]
    pub opening: Option<docmem_core::reader::Opening>,
}

impl SamplingParams {
    /// Whether these settings pick the most likely token every time whatever came before
    /// (no temperature, no repetition penalty): then a backend may pick it where the
    /// logits are ([`super::Backend::forward_argmax`]), and only the token comes back.
    pub fn is_plain_greedy(&self) -> bool {
        !self.penalizes_repetition() && (self.temperature <= 0.0 || !self.temperature.is_finite())
    }

    fn penalizes_repetition(&self) -> bool {
        self.repetition_penalty != 1.0 && self.repetition_penalty > 0.0
    }
}

impl Default for SamplingParams {
    fn default() -> Self {
        SamplingParams {
            temperature: 0.0,
            top_p: 1.0,
            top_k: 0,
            repetition_penalty: 1.0,
            repetition_window: 64,
            seed: 0,
            max_tokens: 256,
            stop: Vec::new(),
            first_token_banned: Vec::new(),
            opening: None,
        }
    }
}

/// Tokens sorted first when looking for the nucleus (see [`choose`]).
const NUCLEUS_HEAD: usize = 256;

/// A sampler's state: its generator.
#[derive(Debug)]
pub struct Sampler {
    params: SamplingParams,
    rng: SmallRng,
    /// Whether a token was picked yet ([`SamplingParams::first_token_banned`] holds until then).
    picked: bool,
}

/// Index of the largest value (the first on ties).
pub fn argmax(logits: &[f32]) -> u32 {
    let mut best = 0;
    for (i, &v) in logits.iter().enumerate() {
        if v > logits[best] {
            best = i;
        }
    }
    best as u32
}

impl Sampler {
    /// A sampler for `params`.
    pub fn new(params: SamplingParams) -> Self {
        let rng = SmallRng::seed_from_u64(params.seed);
        Sampler { params, rng, picked: false }
    }

    /// Before the first pick: the banned tokens out of the running.
    fn ban_first(&mut self, logits: &mut [f32]) {
        if !core::mem::replace(&mut self.picked, true) {
            for &banned in &self.params.first_token_banned {
                if let Some(l) = logits.get_mut(banned as usize) {
                    *l = f32::NEG_INFINITY;
                }
            }
        }
    }

    /// The parameters.
    pub fn params(&self) -> &SamplingParams {
        &self.params
    }

    /// Pick the next token given the logits and the tokens so far.
    pub fn sample(&mut self, logits: &mut [f32], history: &[u32]) -> u32 {
        self.ban_first(logits);
        self.penalize(logits, history);
        match choose(&self.params, logits) {
            Dist::Token(t) => t,
            kept => pick(&kept, self.rng.gen::<f64>()),
        }
    }

    /// The next draw for a backend that samples where the logits are
    /// ([`super::Backend::forward_draw`]): the settings, the recent tokens to penalize, and
    /// the uniform number the generator gives now (none for greedy settings), so the same
    /// seed gives the same text as [`sample`](Self::sample) on the same logits. (One
    /// difference: a row with no finite logit, where `sample` falls back to argmax without
    /// drawing, still uses up this draw's number.)
    pub fn device_draw(&mut self, history: &[u32]) -> DeviceDraw {
        // Every generation path picks its first token on the host, where the ban applies.
        self.picked = true;
        let p = &self.params;
        let greedy = p.temperature <= 0.0 || !p.temperature.is_finite();
        DeviceDraw {
            temperature: if greedy { 0.0 } else { p.temperature },
            top_k: p.top_k,
            // Anything not below 1 (NaN too) keeps every token, as `choose` reads it.
            top_p: if p.top_p < 1.0 { p.top_p } else { 1.0 },
            repetition_penalty: p.repetition_penalty,
            penalized: if p.penalizes_repetition() { recent(history, p.repetition_window) } else { Vec::new() },
            uniform: if greedy { 0.0 } else { self.rng.gen::<f64>() },
        }
    }

    /// Finish on the CPU a draw the backend handed back as logits (`penalized`: whether
    /// the penalty is already applied to them), with the draw's own uniform number.
    pub fn finish_draw(&self, logits: &mut [f32], draw: &DeviceDraw, penalized: bool) -> u32 {
        if !penalized {
            penalize_tokens(logits, &draw.penalized, self.params.repetition_penalty);
        }
        draw_with(&self.params, logits, draw.uniform)
    }

    /// Pick the next token where `draft` was proposed for it (speculative decoding with a
    /// draft that is a single token, as prompt lookup gives): greedy returns the argmax
    /// whatever the draft; sampling accepts the draft with its probability `p(draft)` and
    /// otherwise draws from the other tokens, renormalized — the standard acceptance rule
    /// for a draft distribution that puts all its mass on one token, so the token returned
    /// is distributed exactly as [`sample`](Self::sample)'s.
    pub fn sample_with_draft(&mut self, logits: &mut [f32], history: &[u32], draft: u32) -> u32 {
        self.ban_first(logits);
        self.penalize(logits, history);
        match choose(&self.params, logits) {
            Dist::Token(t) => t,
            Dist::Kept { cand, probs } => {
                let total: f64 = probs.iter().sum();
                let at = cand[..probs.len()].iter().position(|c| c.0 == draft);
                let p_draft = at.map_or(0.0, |i| probs[i] / total);
                if self.rng.gen::<f64>() < p_draft {
                    return draft;
                }
                let rest = total - at.map_or(0.0, |i| probs[i]);
                let mut r = self.rng.gen::<f64>() * rest;
                let mut last = None;
                for (i, &x) in probs.iter().enumerate() {
                    if Some(i) == at {
                        continue;
                    }
                    last = Some(cand[i].0);
                    r -= x;
                    if r <= 0.0 {
                        return cand[i].0;
                    }
                }
                last.unwrap_or(draft)
            }
        }
    }

    /// The repetition penalty on the logits of the recent tokens of `history`.
    fn penalize(&self, logits: &mut [f32], history: &[u32]) {
        let p = &self.params;
        if p.penalizes_repetition() {
            penalize_tokens(logits, &recent(history, p.repetition_window), p.repetition_penalty);
        }
    }
}

/// The last `window` tokens of `history`, sorted, each once.
fn recent(history: &[u32], window: usize) -> Vec<u32> {
    let mut seen: Vec<u32> = history[history.len().saturating_sub(window)..].to_vec();
    seen.sort_unstable();
    seen.dedup();
    seen
}

/// Divide the positive logits of `ids` by `penalty` and multiply the negative ones.
pub(crate) fn penalize_tokens(logits: &mut [f32], ids: &[u32], penalty: f32) {
    for &id in ids {
        if let Some(l) = logits.get_mut(id as usize) {
            *l = if *l > 0.0 { *l / penalty } else { *l * penalty };
        }
    }
}

/// Draw from `dist` with the uniform number `u` in [0, 1): the first candidate where `u`
/// times the kept weight, less the weights so far, reaches 0.
fn pick(dist: &Dist, u: f64) -> u32 {
    match dist {
        Dist::Token(t) => *t,
        Dist::Kept { cand, probs } => {
            let total: f64 = probs.iter().sum();
            let mut r = u * total;
            for (i, &x) in probs.iter().enumerate() {
                r -= x;
                if r <= 0.0 {
                    return cand[i].0;
                }
            }
            cand[probs.len() - 1].0
        }
    }
}

/// The token `sample` would give for `logits` (penalty already applied) and the uniform
/// number `u` (the GPU sampler's check compares against it).
pub(crate) fn draw_with(params: &SamplingParams, logits: &[f32], u: f64) -> u32 {
    pick(&choose(params, logits), u)
}

/// The candidates a draw walks, in order, and their probabilities (`None`: greedy).
#[cfg_attr(not(feature = "gpu"), allow(dead_code))] // the GPU sampler's checks use it
pub(crate) fn kept(params: &SamplingParams, logits: &[f32]) -> Option<(Vec<u32>, Vec<f64>)> {
    match choose(params, logits) {
        Dist::Token(_) => None,
        Dist::Kept { cand, probs } => Some((cand[..probs.len()].iter().map(|c| c.0).collect(), probs)),
    }
}

/// What a backend that samples where the logits are needs for one draw
/// ([`Sampler::device_draw`]).
#[derive(Clone, Debug, PartialEq)]
pub struct DeviceDraw {
    /// Softmax temperature; 0 picks the most likely token.
    pub temperature: f32,
    /// Keep this many most likely tokens (0 = all).
    pub top_k: usize,
    /// Keep the smallest set of tokens whose probability reaches this (1 = all).
    pub top_p: f32,
    /// The repetition penalty (1: none).
    pub repetition_penalty: f32,
    /// The recent tokens it applies to, sorted, each once (empty when the penalty is off:
    /// 1, or not positive).
    pub penalized: Vec<u32>,
    /// The uniform number in [0, 1) the draw uses.
    pub uniform: f64,
}

/// What a backend's draw gives back.
#[derive(Clone, Debug, PartialEq)]
pub enum Drawn {
    /// The token, drawn where the logits are.
    Token(u32),
    /// The logits, for the CPU to finish the draw ([`Sampler::finish_draw`]); `penalized`:
    /// whether the repetition penalty is already applied to them.
    Logits {
        /// The last row's logits.
        logits: Vec<f32>,
        /// Whether the penalty is applied.
        penalized: bool,
    },
}

/// The distribution to draw from: one token (greedy), or candidates and their
/// (unnormalized) probabilities in the order a draw walks them: most likely first, except
/// for temperature alone (no top-k, no top-p), which walks the vocabulary in index order.
fn choose(p: &SamplingParams, logits: &[f32]) -> Dist {
    if p.temperature <= 0.0 || !p.temperature.is_finite() {
        return Dist::Token(argmax(logits));
    }
    let mut cand: Vec<(u32, f32)> = logits.iter().enumerate().filter(|(_, l)| l.is_finite()).map(|(i, &l)| (i as u32, l)).collect();
    if cand.is_empty() {
        return Dist::Token(argmax(logits));
    }
    let finite = cand.len();
    let k = if p.top_k == 0 { finite } else { p.top_k.min(finite) };
    if k < cand.len() {
        cand.select_nth_unstable_by(k - 1, |a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
        cand.truncate(k);
    }
    let top_k_cut = k < finite;
    let order = |a: &(u32, f32), b: &(u32, f32)| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0));
    let max = cand.iter().map(|c| c.1).fold(f32::NEG_INFINITY, f32::max);
    let weight = |l: f32| f64::from((l - max) / p.temperature).exp();
    let total: f64 = cand.iter().map(|&(_, l)| weight(l)).sum();
    // Nucleus sampling needs only the most likely tokens in order: sort a head of
    // them, and the whole vocabulary only when the head does not reach `top_p` (sorting
    // 150,000 logits per token per path would cost a good part of a decode step).
    let mut probs: Vec<f64> = Vec::new();
    let mut sorted = 0;
    if p.top_p < 1.0 {
        let head = NUCLEUS_HEAD.min(cand.len());
        if head < cand.len() {
            cand.select_nth_unstable_by(head - 1, order);
        }
        cand[..head].sort_by(order);
        sorted = head;
        let mut acc = 0.0;
        for &(_, l) in &cand[..head] {
            let x = weight(l) / total;
            probs.push(x);
            acc += x;
            if acc >= f64::from(p.top_p) {
                break;
            }
        }
        if acc < f64::from(p.top_p) && head < cand.len() {
            probs.clear();
            sorted = 0;
        }
    }
    if sorted == 0 {
        // Temperature alone walks the candidates in index order (the same distribution,
        // no sort of the whole vocabulary; the GPU's sampler walks so too).
        if p.top_p < 1.0 || top_k_cut {
            cand.sort_by(order);
        }
        probs = cand.iter().map(|&(_, l)| weight(l) / total).collect();
        if p.top_p < 1.0 {
            let mut acc = 0.0;
            let mut keep = probs.len();
            for (i, &x) in probs.iter().enumerate() {
                acc += x;
                if acc >= f64::from(p.top_p) {
                    keep = i + 1;
                    break;
                }
            }
            probs.truncate(keep);
        }
    }
    Dist::Kept { cand, probs }
}

/// What [`choose`] gives.
enum Dist {
    /// This token, no draw.
    Token(u32),
    /// Draw `cand[i]` with weight `probs[i]` (`probs` may be shorter: the nucleus).
    Kept { cand: Vec<(u32, f32)>, probs: Vec<f64> },
}

/// Natural-log softmax of `logits` at `id`.
pub fn log_prob(logits: &[f32], id: u32) -> f32 {
    let max = logits.iter().fold(f32::NEG_INFINITY, |m, &v| m.max(v));
    let z: f64 = logits.iter().map(|&v| f64::from(v - max).exp()).sum();
    (f64::from(logits[id as usize] - max) - z.ln()) as f32
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_greedy_without_a_repetition_penalty_may_be_picked_on_the_device() {
        let d = SamplingParams::default();
        assert!(d.is_plain_greedy());
        assert!(SamplingParams { repetition_penalty: 0.0, ..d.clone() }.is_plain_greedy(), "a penalty of 0 is off");
        assert!(!SamplingParams { repetition_penalty: 1.1, ..d.clone() }.is_plain_greedy());
        assert!(!SamplingParams { temperature: 0.7, ..d.clone() }.is_plain_greedy());
        assert!(SamplingParams { temperature: f32::NAN, ..d }.is_plain_greedy(), "a temperature that is not finite is greedy");
    }

    #[test]
    fn a_banned_first_token_is_passed_over_once() {
        let params = SamplingParams { first_token_banned: vec![2, 9], ..SamplingParams::default() };
        let mut s = Sampler::new(params);
        let logits = [0.0, 1.0, 5.0, 3.0];
        assert_eq!(s.sample(&mut logits.clone(), &[]), 3, "the best token is banned first, the next best is picked");
        assert_eq!(s.sample(&mut logits.clone(), &[]), 2, "later picks are free");
    }

    #[test]
    fn greedy_is_argmax_with_first_tie() {
        let mut s = Sampler::new(SamplingParams::default());
        assert_eq!(s.sample(&mut [0.1, 3.0, 3.0, -1.0], &[]), 1);
    }

    #[test]
    fn seeded_sampling_is_deterministic_and_respects_top_k() {
        let params = SamplingParams { temperature: 1.0, top_k: 2, seed: 42, ..Default::default() };
        let logits = [1.0, 2.0, 1.9, 0.5, 1.95];
        let draw = |p: &SamplingParams| {
            let mut s = Sampler::new(p.clone());
            (0..50).map(|_| s.sample(&mut logits.clone(), &[])).collect::<Vec<_>>()
        };
        let a = draw(&params);
        assert_eq!(a, draw(&params));
        assert!(a.iter().all(|&t| t == 1 || t == 4), "{a:?}");
        assert!(a.contains(&1) && a.contains(&4));
    }

    /// Nucleus sampling the plain way: sort everything, keep the head reaching `top_p`,
    /// draw from it.
    fn reference_nucleus(logits: &[f32], t: f32, top_p: f32, u: f64) -> u32 {
        let mut cand: Vec<(u32, f32)> = logits.iter().enumerate().map(|(i, &l)| (i as u32, l)).collect();
        cand.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
        let probs: Vec<f64> = cand.iter().map(|&(_, l)| f64::from((l - cand[0].1) / t).exp()).collect();
        let total: f64 = probs.iter().sum();
        let (mut acc, mut keep) = (0.0, probs.len());
        for (i, &x) in probs.iter().enumerate() {
            acc += x / total;
            if acc >= f64::from(top_p) {
                keep = i + 1;
                break;
            }
        }
        let kept: f64 = probs[..keep].iter().map(|x| x / total).sum();
        let mut r = u * kept;
        for i in 0..keep {
            r -= probs[i] / total;
            if r <= 0.0 {
                return cand[i].0;
            }
        }
        cand[keep - 1].0
    }

    /// The sorted head (and its fallback to the whole vocabulary when the head is too
    /// flat to reach `top_p`) draws what plain nucleus sampling draws.
    #[test]
    fn nucleus_from_a_sorted_head_equals_sorting_everything() {
        let vocab = 5000;
        for (name, scale) in [("peaked", 40.0f32), ("flat", 0.01)] {
            let logits: Vec<f32> = (0..vocab).map(|i| scale * (((i as u64 * 2654435761) % 1000) as f32 / 1000.0)).collect();
            let params = SamplingParams { temperature: 0.7, top_p: 0.8, seed: 3, ..Default::default() };
            let mut s = Sampler::new(params.clone());
            let mut rng = SmallRng::seed_from_u64(3);
            for draw in 0..200 {
                let want = reference_nucleus(&logits, 0.7, 0.8, rng.gen::<f64>());
                assert_eq!(s.sample(&mut logits.clone(), &[]), want, "{name} draw {draw}");
            }
        }
    }

    /// Drafted or not, a token is drawn with the same probability (the acceptance rule
    /// keeps the distribution): frequencies over many draws, with the draft the most
    /// likely token, a less likely one, and one outside the nucleus.
    #[test]
    fn drafts_keep_the_sampling_distribution() {
        let logits = [2.0f32, 1.5, 1.0, 0.2, -3.0];
        let params = SamplingParams { temperature: 0.7, top_p: 0.9, seed: 5, ..Default::default() };
        let n = 40_000;
        let freq = |draft: Option<u32>| {
            let mut s = Sampler::new(params.clone());
            let mut counts = [0usize; 5];
            for _ in 0..n {
                let t = match draft {
                    Some(d) => s.sample_with_draft(&mut logits.clone(), &[], d),
                    None => s.sample(&mut logits.clone(), &[]),
                };
                counts[t as usize] += 1;
            }
            counts.map(|c| c as f64 / n as f64)
        };
        let plain = freq(None);
        assert_eq!(plain[4], 0.0, "outside the nucleus");
        for d in [0, 2, 4] {
            let drafted = freq(Some(d));
            for (t, (a, b)) in plain.iter().zip(&drafted).enumerate() {
                assert!((a - b).abs() < 0.012, "draft {d}, token {t}: {a} vs {b}");
            }
        }
        // Greedy ignores the draft.
        let mut g = Sampler::new(SamplingParams::default());
        assert_eq!(g.sample_with_draft(&mut logits.clone(), &[], 3), 0);
    }

    #[test]
    fn repetition_penalty_demotes_seen_tokens() {
        let mut s = Sampler::new(SamplingParams { repetition_penalty: 2.0, ..Default::default() });
        assert_eq!(s.sample(&mut [1.0, 1.5, 0.0], &[1]), 0);
    }

    #[test]
    fn log_probs_normalise() {
        let l = [0.0f32, 1.0, 2.0];
        let total: f32 = (0..3).map(|i| log_prob(&l, i).exp()).sum();
        assert!((total - 1.0).abs() < 1e-5);
    }
}
