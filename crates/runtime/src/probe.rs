//! The answerability probe: a linear read of the answerer's hidden state that says whether
//! the passages in its prompt answer the question.
//!
//! Why: the 1.5B answerer's own refusals and its probabilities separate answerable from
//! unanswerable questions poorly (SQuAD v2's unanswerable questions are written to look
//! answerable from the same paragraph). Its residual stream a little past half-way through
//! the model separates them better: a logistic regression over that state, fitted on the
//! dev split of the SQuAD v2 sample (`docmem eval answers --states`, then
//! `scripts/eval/fit-answerability-probe.py --write`), gives log-odds that
//! [`docmem_core::answerability`] turns into the decision. The probe says which token it
//! reads ([`ProbePosition`]): the default answerer's reads the question's last token, just
//! read after the passages, which separated them better than the prompt's last token in
//! every dev run and on questions held out, if by margins within each run's noise. Reading
//! it costs a dot product and one more small batch: the state is computed by the prefill
//! the answer needs anyway, run in two pieces split after that token.
//!
//! A probe belongs to one model file: [`for_model`] knows only the default answerer's
//! (`probes/qwen2.5-1.5b-answerability.json`), matched by the file's identity
//! ([`ModelIdentity`]), so another model of its shape gets none; other models are judged
//! as before.

use std::sync::OnceLock;

use crate::model::ModelIdentity;

/// The identity of the file the default answerer's probe was fitted on,
/// `qwen2.5-coder-1.5b-instruct-q4_k_m.gguf` (`docmem models fetch`; `cargo run -p
/// docmem-runtime --example gguf_info FILE` prints it).
pub const QWEN_1_5B_IDENTITY: &str = "a5ca24a1d7acefcf43b814adc6c002f737af370ea6ccde58b4b371b3f134406d";

/// A fitted probe: `log-odds = bias + weights · state` over the residual after `layer` at
/// the token `position` names.
#[derive(Debug, serde::Deserialize)]
pub struct AnswerabilityProbe {
    /// The layer (0-based) whose output it reads.
    pub layer: usize,
    /// The answer prompt's token whose state it reads.
    #[serde(default)]
    pub position: ProbePosition,
    /// One weight per hidden dimension (the standardization folded in).
    pub weights: Vec<f32>,
    /// Intercept.
    pub bias: f32,
    /// Below this log-odds the answer is refused (chosen on held-out dev scores).
    pub threshold: f32,
}

/// The answer prompt's token an [`AnswerabilityProbe`] reads.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
#[non_exhaustive]
pub enum ProbePosition {
    /// The prompt's last token, where the reply begins (after the chat template's closing
    /// of the user's turn and its opening of the assistant's).
    #[default]
    Prompt,
    /// The last token of the user's turn, which an answer prompt ends with its question:
    /// where the model has just read the question after the passages. On the dev split it
    /// read at least as well as the prompt's last token in every run (`docs/evaluation.md`).
    Question,
}

impl AnswerabilityProbe {
    /// The probe's log-odds that the passages answer the question, for the hidden state
    /// `state` after [`AnswerabilityProbe::layer`] at [`AnswerabilityProbe::position`].
    pub fn log_odds(&self, state: &[f32]) -> f32 {
        self.bias + self.weights.iter().zip(state).map(|(w, x)| w * x).sum::<f32>()
    }

    /// [`AnswerabilityProbe::log_odds`] less the threshold: below zero the probe says the
    /// passages do not answer the question ([`docmem_core::answerability::Evidence::probe`]).
    pub fn margin(&self, state: &[f32]) -> f32 {
        self.log_odds(state) - self.threshold
    }
}

/// The probe fitted on the states of the model file `identity` names, if any: the default
/// answerer's.
pub fn for_model(identity: Option<&ModelIdentity>) -> Option<&'static AnswerabilityProbe> {
    static QWEN_1_5B: OnceLock<Option<AnswerabilityProbe>> = OnceLock::new();
    if identity.map(ModelIdentity::to_hex).as_deref() != Some(QWEN_1_5B_IDENTITY) {
        return None;
    }
    QWEN_1_5B
        .get_or_init(|| {
            let probe: AnswerabilityProbe = serde_json::from_str(include_str!("../probes/qwen2.5-1.5b-answerability.json")).ok()?;
            (probe.weights.len() == 1536 && probe.layer < 28).then_some(probe)
        })
        .as_ref()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn identity(hex: &str) -> ModelIdentity {
        ModelIdentity::from_hex(hex).unwrap()
    }

    #[test]
    fn the_default_answerers_probe_loads_and_reads_a_state() {
        let probe = for_model(Some(&identity(QWEN_1_5B_IDENTITY))).expect("the 1.5B has a probe");
        assert!(probe.layer < 28 && probe.weights.iter().all(|w| w.is_finite()));
        assert_eq!(probe.log_odds(&[0.0; 1536]), probe.bias);
        assert_eq!(probe.margin(&[0.0; 1536]), probe.bias - probe.threshold);
        let along: Vec<f32> = probe.weights.iter().map(|w| w.signum()).collect();
        assert!(probe.log_odds(&along) > probe.bias, "a state along the weights reads as more answerable");
        let other = QWEN_1_5B_IDENTITY.replacen('a', "b", 1);
        assert!(for_model(Some(&identity(&other))).is_none(), "another file has none, whatever its shape");
        assert!(for_model(None).is_none(), "nor a model of unknown identity");
    }

    #[test]
    fn a_probe_says_which_token_it_reads_and_the_prompts_last_when_it_does_not() {
        let read = |json: &str| serde_json::from_str::<AnswerabilityProbe>(json).map(|p| p.position);
        let fields = r#""layer": 3, "weights": [0.5], "bias": 0.0, "threshold": 0.0"#;
        assert_eq!(read(&format!("{{{fields}}}")).unwrap(), ProbePosition::Prompt);
        assert_eq!(read(&format!(r#"{{{fields}, "position": "question"}}"#)).unwrap(), ProbePosition::Question);
        assert!(read(&format!(r#"{{{fields}, "position": "answer"}}"#)).is_err(), "an unknown token is refused");
    }
}
