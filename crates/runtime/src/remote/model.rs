//! A hosted chat model in every LM role: reader, scorer, short-reply model and answerer.
//!
//! Choices made where the API differs from a local model:
//! - **Candidates.** The reader's candidates are one request each (greedy, then each
//!   sampled spec with its own seed), not one batch: specs differ in temperature, which
//!   the API's `n` cannot express. Hosts that cache prompt prefixes (vLLM, llama.cpp's
//!   server) read the document once anyway. Every reply is streamed, even where only the
//!   whole is wanted, so no proxy's time-to-headers limit cuts a long one.
//! - **Scoring.** Completeness needs the log-probability of each token of a chunk given
//!   its core, i.e. of the *prompt's* tokens: a completion with `echo` and `logprobs`
//!   returns them (OpenAI's legacy API, vLLM). A token that straddles the boundary between
//!   context and continuation counts toward the continuation (the host tokenizes the
//!   joined text; we cannot cut inside a token). Hosts without `echo` (llama.cpp's server)
//!   cannot score completeness: a clear [`Error::RemoteUnsupported`], which names the
//!   ways around it. Clarity's next-token question needs only the first generated token,
//!   so without `echo` it is read from that token's top 20 alternatives; an answer not
//!   among them gets the smallest of their log-probabilities (a bound: it is no likelier).
//! - **Token counts.** The API has no tokenizer endpoint, so counts are estimated
//!   ([`ApproxTokenCounter`]: within about 20% of BPE on English); the context window is
//!   a setting ([`RemoteModel::with_context`]).

use std::cell::Cell;
use std::ops::ControlFlow;

use docmem_core::chunk::{ApproxTokenCounter, TokenCounter};
use docmem_core::local_future::{boxed, LocalBoxFuture};
use docmem_core::reader::{Generated, ReaderModel, SampleSpec};
use docmem_core::text_model::TextModel;
use docmem_core::Scorer;

use super::api::{self, FinishReason, Sampling, StreamEvent};
use super::sse::SseDecoder;
use super::Transport;
use crate::answerer::{Answerer, Reply, ReplyOptions};
use crate::lm::Finish;
use crate::Error;

/// The context window assumed for a hosted model when none is given: 8,192 tokens, what
/// the smallest models served for this (Qwen2.5 1.5B–7B serve 32k) all take.
pub const DEFAULT_REMOTE_CONTEXT: usize = 8192;

/// Alternatives asked for when reading the next token's log-probabilities without `echo`.
const TOP_ALTERNATIVES: usize = 20;

/// A hosted chat model (see the module docs).
#[derive(Debug)]
pub struct RemoteModel<T: Transport> {
    transport: T,
    model: String,
    context: usize,
    /// Whether the host returns the prompt's log-probabilities: unknown until asked.
    echo: Cell<Option<bool>>,
}

/// Another handle on the same hosted model (it shares the transport, and what was learned
/// of the host's log-probabilities so far).
impl<T: Transport + Clone> Clone for RemoteModel<T> {
    fn clone(&self) -> Self {
        RemoteModel { transport: self.transport.clone(), model: self.model.clone(), context: self.context, echo: self.echo.clone() }
    }
}

impl<T: Transport> RemoteModel<T> {
    /// The model named `model` (as the host lists it) through `transport`.
    pub fn new(transport: T, model: impl Into<String>) -> Self {
        RemoteModel { transport, model: model.into(), context: DEFAULT_REMOTE_CONTEXT, echo: Cell::new(None) }
    }

    /// This model with a context window of `tokens` (0: the default).
    pub fn with_context(mut self, tokens: usize) -> Self {
        self.context = if tokens == 0 { DEFAULT_REMOTE_CONTEXT } else { tokens };
        self
    }

    /// The model's name on the host.
    pub fn model(&self) -> &str {
        &self.model
    }

    /// One whole chat reply, received as a stream all the same: a stream's first bytes come
    /// at the first token, so an edge worker's or proxy's timeout to the response headers
    /// never cuts a long reply (a reader's 768 tokens from a 7B model take minutes), and a
    /// host that goes quiet is noticed between tokens. Returns the text and its tokens
    /// (counted as the events that carried text: hosts stream one token per event).
    pub async fn chat(&self, user_turn: &str, sampling: &Sampling) -> Result<(String, usize), Error> {
        let mut events = 0;
        let reply = self
            .chat_streaming(user_turn, sampling, &mut |_| {
                events += 1;
                ControlFlow::Continue(())
            })
            .await?;
        Ok((reply.text, events))
    }

    /// One chat reply, streamed to `on_text`; `Break` from it ends the request.
    pub async fn chat_streaming(
        &self,
        user_turn: &str,
        sampling: &Sampling,
        on_text: &mut dyn FnMut(&str) -> ControlFlow<()>,
    ) -> Result<Reply, Error> {
        let started = crate::lm::now_seconds();
        let body = api::chat_request(&self.model, user_turn, sampling, true);
        let mut decoder = SseDecoder::new();
        let mut stream = Streamed::default();
        let mut failed: Option<Error> = None;
        let reply = {
            let mut on_bytes = |bytes: &[u8]| -> ControlFlow<()> {
                let events = match decoder.push(bytes) {
                    Ok(events) => events,
                    Err(message) => {
                        failed = Some(Error::RemoteBadReply { message });
                        return ControlFlow::Break(());
                    }
                };
                for data in events {
                    match stream.take(&data, on_text) {
                        Ok(ControlFlow::Continue(())) => {}
                        Ok(ControlFlow::Break(())) => return ControlFlow::Break(()),
                        Err(e) => {
                            failed = Some(e);
                            return ControlFlow::Break(());
                        }
                    }
                }
                ControlFlow::Continue(())
            };
            self.transport.post_streaming(api::CHAT_PATH, &body, &mut on_bytes).await?
        };
        if !(200..300).contains(&reply.status) {
            return Err(api::status_error(reply.status, &reply.body));
        }
        if let Some(e) = failed {
            return Err(e);
        }
        if !stream.stopped {
            if let Some(data) = decoder.finish() {
                let _ = stream.take(&data, on_text)?;
            }
        }
        let now = crate::lm::now_seconds();
        let began = stream.first_text_at.unwrap_or(now);
        let finish = if stream.stopped {
            Finish::Cancelled
        } else {
            match stream.finish {
                Some(FinishReason::Length) => Finish::Length,
                Some(_) => Finish::EndOfText,
                None if stream.done => Finish::EndOfText,
                None => return Err(Error::RemoteTransport { message: "the stream ended before the reply did".into() }),
            }
        };
        Ok(Reply {
            text: stream.text,
            finish,
            prefill_seconds: began - started,
            decode_seconds: now - began,
            reused_tokens: 0,
            prompt_tokens: 0,
            probabilities: None,
        })
    }

    /// For each `(context, continuation)`, the log-probabilities of the continuation's
    /// tokens after its context, from the prompts' echoed log-probabilities (see the module
    /// docs); the pairs go in batches of prompts, one request each.
    pub async fn continuations(&self, pairs: &[(&str, &str)]) -> Result<Vec<Vec<f32>>, Error> {
        if self.echo.get() == Some(false) {
            return Err(no_echo());
        }
        let mut out = Vec::with_capacity(pairs.len());
        let mut start = 0;
        while start < pairs.len() {
            let mut end = start + 1;
            let mut bytes = pairs[start].0.len() + pairs[start].1.len();
            while end < pairs.len() && end - start < BATCH_PROMPTS && bytes + pairs[end].0.len() + pairs[end].1.len() <= BATCH_BYTES {
                bytes += pairs[end].0.len() + pairs[end].1.len();
                end += 1;
            }
            out.extend(self.continuation_batch(&pairs[start..end]).await?);
            start = end;
        }
        Ok(out)
    }

    async fn continuation_batch(&self, pairs: &[(&str, &str)]) -> Result<Vec<Vec<f32>>, Error> {
        let prompts: Vec<String> = pairs.iter().map(|(c, x)| format!("{c}{x}")).collect();
        let refs: Vec<&str> = prompts.iter().map(String::as_str).collect();
        let body = api::logprobs_request(&self.model, &refs, true, 1);
        let reply = self.transport.post(api::COMPLETIONS_PATH, &body).await?;
        if !(200..300).contains(&reply.status) {
            let e = api::status_error(reply.status, &reply.body);
            if matches!(&e, Error::RemoteStatus { message, .. } if message.to_lowercase().contains("echo")) {
                self.echo.set(Some(false));
                return Err(no_echo());
            }
            return Err(e);
        }
        let choices = api::read_logprobs_all(&api::success_json(&reply)?, pairs.len())?;
        let mut out = Vec::with_capacity(pairs.len());
        for ((context, continuation), (tokens, prompt)) in pairs.iter().zip(choices.iter().zip(&prompts)) {
            // Echoed tokens carry offsets; a host that ignored `echo` returns only the one
            // generated token, without.
            if tokens.iter().all(|t| t.offset.is_none()) {
                self.echo.set(Some(false));
                return Err(no_echo());
            }
            self.echo.set(Some(true));
            out.push(continuation_logprobs(tokens, context.chars().count(), prompt.chars().count(), continuation.is_empty())?);
        }
        Ok(out)
    }

    /// Each candidate's log-probability as what follows `prompt`: exact from echoed
    /// log-probabilities (one request for all candidates), else from the first token's top
    /// alternatives.
    pub async fn next_token(&self, prompt: &str, candidates: &[&str]) -> Result<Vec<f32>, Error> {
        let pairs: Vec<(&str, &str)> = candidates.iter().map(|c| (prompt, *c)).collect();
        match self.continuations(&pairs).await {
            Ok(lps) => Ok(lps.iter().map(|lp| lp.iter().sum()).collect()),
            Err(Error::RemoteUnsupported { .. }) => self.next_token_from_top(prompt, candidates).await,
            Err(e) => Err(e),
        }
    }

    async fn next_token_from_top(&self, prompt: &str, candidates: &[&str]) -> Result<Vec<f32>, Error> {
        let body = api::logprobs_request(&self.model, &[prompt], false, TOP_ALTERNATIVES);
        let reply = self.transport.post(api::COMPLETIONS_PATH, &body).await?;
        let tokens = api::read_logprobs(&api::success_json(&reply)?)?;
        let first = tokens.first().ok_or_else(|| Error::RemoteBadReply { message: "no generated token".into() })?;
        if first.top.is_empty() {
            return Err(Error::RemoteBadReply { message: "the generated token has no top alternatives".into() });
        }
        let floor = first.top.iter().map(|(_, lp)| *lp).fold(f32::INFINITY, f32::min);
        Ok(candidates.iter().map(|c| first.top.iter().find(|(t, _)| t == c).map_or(floor, |(_, lp)| *lp)).collect())
    }
}

/// Prompts per scoring request, and their bytes: well inside an edge worker's body limit.
const BATCH_PROMPTS: usize = 32;
const BATCH_BYTES: usize = 256 << 10;

/// The log-probabilities of the tokens of one echoed prompt that fall in the continuation:
/// characters `start..end` of the prompt. Offsets are counted from where the host says the
/// prompt begins: the one generated token starts at the prompt's end, so any shift (a
/// host that counts a BOS token's text, as vLLM does) is taken from it. A token that
/// straddles `start` counts toward the continuation.
fn continuation_logprobs(tokens: &[api::TokenLogprob], start: usize, end: usize, empty: bool) -> Result<Vec<f32>, Error> {
    let shift = tokens.last().and_then(|t| t.offset).map_or(0, |generated| generated.saturating_sub(end));
    let picked: Vec<f32> = tokens[..tokens.len().saturating_sub(1)]
        .iter()
        .filter_map(|t| {
            let at = t.offset?.checked_sub(shift)?;
            let ends = at.saturating_add(t.token.chars().count());
            (at < end && ends > start).then_some(t.logprob).flatten()
        })
        .collect();
    if picked.is_empty() && !empty {
        return Err(Error::RemoteBadReply { message: "the echoed log-probabilities do not cover the continuation".into() });
    }
    Ok(picked)
}

/// A streamed reply as its events arrive.
#[derive(Debug, Default)]
struct Streamed {
    text: String,
    finish: Option<FinishReason>,
    /// `[DONE]` came.
    done: bool,
    /// The caller asked to stop.
    stopped: bool,
    first_text_at: Option<f64>,
}

/// The longest reply taken (bytes): far past any `max_tokens` docmem asks for, so only a
/// host that ignores it (or a hostile one) reaches it.
const MAX_REPLY_BYTES: usize = 16 << 20;

impl Streamed {
    /// Take one event's data, handing new text to `on_text`.
    fn take(&mut self, data: &str, on_text: &mut dyn FnMut(&str) -> ControlFlow<()>) -> Result<ControlFlow<()>, Error> {
        match api::read_stream_event(data)? {
            StreamEvent::Done => self.done = true,
            StreamEvent::Delta { text, finish } => {
                if finish.is_some() {
                    self.finish = finish;
                }
                if !text.is_empty() {
                    if self.text.len() + text.len() > MAX_REPLY_BYTES {
                        return Err(Error::RemoteBadReply { message: format!("the reply is longer than {MAX_REPLY_BYTES} bytes") });
                    }
                    self.first_text_at.get_or_insert_with(crate::lm::now_seconds);
                    self.text.push_str(&text);
                    if on_text(&text).is_break() {
                        self.stopped = true;
                        return Ok(ControlFlow::Break(()));
                    }
                }
            }
        }
        Ok(ControlFlow::Continue(()))
    }
}

fn no_echo() -> Error {
    Error::RemoteUnsupported {
        message: "the host returns no log-probabilities of the prompt's tokens (`echo`), which completeness scoring needs: use a host that does (vLLM), a local scorer, or no sampled candidates".into(),
    }
}

fn approx_tokens(text: &str) -> usize {
    ApproxTokenCounter.count_tokens(text)
}

fn greedy(max_tokens: usize) -> Sampling {
    Sampling { temperature: 0.0, top_p: 1.0, seed: None, max_tokens }
}

impl<T: Transport> Scorer for RemoteModel<T> {
    fn continuation_logprobs<'a>(
        &'a mut self,
        pairs: &'a [(&'a str, &'a str)],
    ) -> LocalBoxFuture<'a, Result<Vec<Vec<f32>>, docmem_core::Error>> {
        boxed(async move {
            if pairs.iter().any(|(_, continuation)| continuation.is_empty()) {
                return Err(docmem_core::Error::EmptyContinuation);
            }
            Ok(self.continuations(pairs).await?)
        })
    }

    fn next_token_logprobs<'a>(
        &'a mut self,
        prompt: &'a str,
        candidates: &'a [&'a str],
    ) -> LocalBoxFuture<'a, Result<Vec<f32>, docmem_core::Error>> {
        boxed(async move { Ok(self.next_token(prompt, candidates).await?) })
    }

    fn count_tokens(&mut self, text: &str) -> Result<usize, docmem_core::Error> {
        Ok(approx_tokens(text))
    }
}

impl<T: Transport> ReaderModel for RemoteModel<T> {
    fn name(&self) -> String {
        format!("remote:{}", self.model)
    }

    fn context_tokens(&self) -> usize {
        self.context
    }

    fn chat_overhead_tokens(&mut self) -> usize {
        // A chat template's user turn and the assistant's opening: about 10–30 tokens in
        // the templates served (ChatML, Llama 3); the larger, so windows never overflow.
        32
    }

    fn generate<'a>(
        &'a mut self,
        user_turn: &'a str,
        specs: &'a [SampleSpec],
        max_tokens: usize,
        after_each: &'a mut dyn FnMut(usize, &Generated) -> bool,
    ) -> LocalBoxFuture<'a, Result<Vec<Generated>, docmem_core::Error>> {
        boxed(async move {
            let mut out = Vec::with_capacity(specs.len());
            for spec in specs {
                let sampling = if spec.temperature <= 0.0 {
                    greedy(max_tokens)
                } else {
                    Sampling { temperature: spec.temperature, top_p: spec.top_p, seed: Some(spec.seed), max_tokens }
                };
                let (text, tokens) = self.chat(user_turn, &sampling).await?;
                let generated = Generated { tokens, text };
                if !after_each(out.len() + 1, &generated) {
                    return Err(docmem_core::Error::Cancelled);
                }
                out.push(generated);
            }
            Ok(out)
        })
    }
}

impl<T: Transport> TextModel for RemoteModel<T> {
    fn context_tokens(&self) -> usize {
        self.context
    }

    fn count_tokens(&mut self, text: &str) -> Result<usize, docmem_core::Error> {
        Ok(approx_tokens(text))
    }

    fn complete<'a>(
        &'a mut self,
        context: &'a str,
        request: &'a str,
        max_tokens: usize,
    ) -> LocalBoxFuture<'a, Result<String, docmem_core::Error>> {
        boxed(async move { Ok(self.chat(&format!("{context}{request}"), &greedy(max_tokens)).await?.0) })
    }
}

impl<T: Transport> Answerer for RemoteModel<T> {
    fn reply<'a>(
        &'a self,
        user_turn: &'a str,
        options: ReplyOptions,
        on_text: &'a mut dyn FnMut(&str) -> ControlFlow<()>,
    ) -> LocalBoxFuture<'a, Result<Reply, Error>> {
        boxed(async move { self.chat_streaming(user_turn, &greedy(options.max_tokens), on_text).await })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::remote::testing::{reply, FakeTransport};
    use docmem_core::local_future::poll_once;

    fn sse(pieces: &[&str], finish: &str) -> String {
        let mut s = String::new();
        for p in pieces {
            s += &format!("data: {}\n\n", serde_json::json!({"choices":[{"delta":{"content":p},"finish_reason":null}]}));
        }
        s += &format!("data: {}\n\ndata: [DONE]\n\n", serde_json::json!({"choices":[{"delta":{},"finish_reason":finish}]}));
        s
    }

    #[test]
    fn an_answer_streams_piece_by_piece_and_stops_when_asked() {
        let t = FakeTransport::new(|_, _| reply(200, &sse(&["The ", "Gutenberg ", "Bible"], "stop")));
        let m = RemoteModel::new(&t, "big");
        let mut pieces = Vec::new();
        let r = poll_once(m.chat_streaming("q", &greedy(8), &mut |p| {
            pieces.push(p.to_string());
            ControlFlow::Continue(())
        }))
        .unwrap()
        .unwrap();
        assert_eq!(pieces, ["The ", "Gutenberg ", "Bible"]);
        assert_eq!((r.text.as_str(), r.finish), ("The Gutenberg Bible", Finish::EndOfText));
        let sent: serde_json::Value = serde_json::from_str(&t.requests()[0].1).unwrap();
        assert_eq!((sent["stream"].as_bool(), sent["model"].as_str(), sent["temperature"].as_f64()), (Some(true), Some("big"), Some(0.0)));

        let mut n = 0;
        let r = poll_once(m.chat_streaming("q", &greedy(8), &mut |_| {
            n += 1;
            if n == 2 {
                ControlFlow::Break(())
            } else {
                ControlFlow::Continue(())
            }
        }))
        .unwrap()
        .unwrap();
        assert_eq!((r.text.as_str(), r.finish), ("The Gutenberg ", Finish::Cancelled));
        assert!(t.cancelled(), "the transport was told to close the stream");
    }

    #[test]
    fn a_stream_cut_short_or_refused_is_an_error() {
        let t = FakeTransport::new(|_, _| reply(200, "data: {\"choices\":[{\"delta\":{\"content\":\"Hal\"}}]}\n\n"));
        let e = poll_once(RemoteModel::new(&t, "m").chat_streaming("q", &greedy(8), &mut |_| ControlFlow::Continue(()))).unwrap();
        assert!(matches!(e, Err(Error::RemoteTransport { .. })), "{e:?}");
        let t = FakeTransport::new(|_, _| reply(401, r#"{"error":{"code":"unauthorized","message":"no token"}}"#));
        let e = poll_once(RemoteModel::new(&t, "m").chat_streaming("q", &greedy(8), &mut |_| ControlFlow::Continue(()))).unwrap();
        assert!(matches!(e, Err(Error::RemoteStatus { status: 401, code: Some(ref c), .. }) if c == "unauthorized"), "{e:?}");
    }

    #[test]
    fn reader_candidates_are_one_request_per_spec_with_their_sampling() {
        let t = FakeTransport::new(|_, body| {
            let v: serde_json::Value = serde_json::from_str(body).unwrap();
            let temperature = v["temperature"].to_string();
            reply(200, &sse(&["t", "=", &temperature], "stop"))
        });
        let mut m = RemoteModel::new(&t, "reader");
        let specs = [SampleSpec::GREEDY, SampleSpec { temperature: 0.7, top_p: 0.8, seed: 42, opening: None }];
        let mut seen = Vec::new();
        let out = poll_once(m.generate("doc", &specs, 100, &mut |n, _| {
            seen.push(n);
            true
        }))
        .unwrap()
        .unwrap();
        assert_eq!(out.iter().map(|g| (g.text.as_str(), g.tokens)).collect::<Vec<_>>(), [("t=0.0", 3), ("t=0.7", 3)]);
        assert_eq!(seen, [1, 2]);
        let second: serde_json::Value = serde_json::from_str(&t.requests()[1].1).unwrap();
        assert_eq!((second["seed"].as_u64(), second["max_tokens"].as_u64()), (Some(42), Some(100)));
        assert_eq!(second["stream"], true, "long replies stream, so no proxy times out waiting for headers");
        let first: serde_json::Value = serde_json::from_str(&t.requests()[0].1).unwrap();
        assert!(first.get("seed").is_none());
        let cancelled = poll_once(m.generate("doc", &specs, 100, &mut |_, _| false)).unwrap();
        assert_eq!(cancelled, Err(docmem_core::Error::Cancelled));
    }

    #[test]
    fn echoed_logprobs_score_the_continuation_and_straddlers_count() {
        // "The cat sat": context "The ca", continuation "t sat"; tokens The|_cat|_sat at 0,3,7.
        let t = FakeTransport::new(|_, _| {
            reply(
                200,
                r#"{"choices":[{"logprobs":{"tokens":["The"," cat"," sat","."],"token_logprobs":[null,-1.0,-2.0,-0.5],"text_offset":[0,3,7,11]}}]}"#,
            )
        });
        let mut m = RemoteModel::new(&t, "s");
        let got = poll_once(m.continuation_logprobs(&[("The ca", "t sat")])).unwrap().unwrap();
        assert_eq!(got, vec![vec![-1.0, -2.0]], "the generated '.' (offset 11) is not part of it");
        let sent: serde_json::Value = serde_json::from_str(&t.requests()[0].1).unwrap();
        assert_eq!((sent["echo"].as_bool(), sent["prompt"].as_str()), (Some(true), Some("The cat sat")));
    }

    #[test]
    fn offsets_counted_from_a_bos_token_are_shifted_back() {
        // vLLM counts the text of a BOS token: every offset is 17 characters on.
        let t = FakeTransport::new(|_, _| {
            reply(
                200,
                r#"{"choices":[{"logprobs":{"tokens":["<|begin_of_text|>","The"," cat"," sat","."],"token_logprobs":[null,-0.5,-1.0,-2.0,-0.5],"text_offset":[0,17,20,24,28]}}]}"#,
            )
        });
        let got = poll_once(RemoteModel::new(&t, "s").continuation_logprobs(&[("The cat", " sat")])).unwrap().unwrap();
        assert_eq!(got, vec![vec![-2.0]]);
    }

    #[test]
    fn scoring_pairs_go_as_one_batch_of_prompts_in_order() {
        let t = FakeTransport::new(|_, body| {
            let v: serde_json::Value = serde_json::from_str(body).unwrap();
            let prompts = v["prompt"].as_array().unwrap();
            // Answer out of order, each choice its prompt's length as the only log-prob.
            let choices: Vec<_> = prompts
                .iter()
                .enumerate()
                .rev()
                .map(|(i, p)| {
                    let n = p.as_str().unwrap().chars().count();
                    serde_json::json!({"index": i, "logprobs": {"tokens": ["a", "b", "."], "token_logprobs": [null, -(n as f64), -0.1], "text_offset": [0, n - 1, n]}})
                })
                .collect();
            reply(200, &serde_json::json!({ "choices": choices }).to_string())
        });
        let mut m = RemoteModel::new(&t, "s");
        let got = poll_once(m.continuation_logprobs(&[("ab", "c"), ("abcd", "e")])).unwrap().unwrap();
        assert_eq!(got, vec![vec![-3.0], vec![-5.0]]);
        assert_eq!(t.requests().len(), 1);
    }

    #[test]
    fn without_echo_completeness_is_unsupported_and_clarity_reads_top_alternatives() {
        let t = FakeTransport::new(|_, body| {
            if body.contains("\"echo\":true") {
                reply(400, r#"{"error":{"code":400,"message":"Only no echo is supported"}}"#)
            } else {
                reply(
                    200,
                    r#"{"choices":[{"logprobs":{"content":[{"token":" one","logprob":-0.2,"top_logprobs":[{"token":" one","logprob":-0.2},{"token":" One","logprob":-3.0}]}]}}]}"#,
                )
            }
        });
        let mut m = RemoteModel::new(&t, "s");
        let e = poll_once(m.continuation_logprobs(&[("a", "b")])).unwrap().unwrap_err();
        assert!(e.to_string().contains("echo"), "{e}");
        let lp = poll_once(m.next_token_logprobs("Is it one piece?", &[" one", " two"])).unwrap().unwrap();
        assert_eq!(lp, vec![-0.2, -3.0], "a candidate outside the top list gets its floor");
        // The host's answer about echo is remembered: no second echo request.
        let echo_requests = t.requests().iter().filter(|(_, b)| b.contains("\"echo\":true")).count();
        assert_eq!(echo_requests, 1);
    }
}
