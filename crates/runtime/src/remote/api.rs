//! The OpenAI-compatible protocol, as far as docmem uses it: request bodies for chat
//! completions, completions with log-probabilities and embeddings, and readers for their
//! replies (whole and streamed) and for the API's errors.
//!
//! Replies are read leniently (`serde_json::Value`, unknown fields ignored) because hosts
//! differ in what they add. Log-probabilities come in two shapes, both read: the legacy
//! completions shape (`tokens`, `token_logprobs`, `top_logprobs` as maps, `text_offset`;
//! OpenAI, vLLM) and the chat shape (`content: [{token, logprob, top_logprobs: [...]}]`;
//! llama.cpp's server uses it for completions too).

use serde_json::{json, Value};

use super::HttpReply;
use crate::Error;

/// The API's paths.
pub const CHAT_PATH: &str = "/v1/chat/completions";
/// Plain-text completions (scoring reads their log-probabilities).
pub const COMPLETIONS_PATH: &str = "/v1/completions";
/// Embeddings.
pub const EMBEDDINGS_PATH: &str = "/v1/embeddings";

/// How one reply is sampled.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Sampling {
    /// Temperature (0: greedy).
    pub temperature: f32,
    /// Nucleus threshold.
    pub top_p: f32,
    /// Seed, for hosts that take one (vLLM and llama.cpp's server do).
    pub seed: Option<u64>,
    /// Most tokens of the reply.
    pub max_tokens: usize,
}

/// An f32 setting as the decimal it was written as (0.7, not 0.699999988…).
fn decimal(x: f32) -> f64 {
    (f64::from(x) * 1e6).round() / 1e6
}

/// The body of a chat completion with one user turn.
pub fn chat_request(model: &str, user_turn: &str, s: &Sampling, stream: bool) -> String {
    let mut body = json!({
        "model": model,
        "messages": [{"role": "user", "content": user_turn}],
        "max_tokens": s.max_tokens,
        "temperature": decimal(s.temperature),
        "top_p": decimal(s.top_p),
        "stream": stream,
    });
    if let Some(seed) = s.seed {
        body["seed"] = json!(seed);
    }
    body.to_string()
}

/// The body of a greedy one-token completion of each of `prompts` (one choice each, in
/// order by their `index`) that returns the log-probability of each of the prompt's tokens
/// (`echo`) and the `top` likeliest first tokens.
pub fn logprobs_request(model: &str, prompts: &[&str], echo: bool, top: usize) -> String {
    let prompt = match prompts {
        [one] => json!(one),
        many => json!(many),
    };
    json!({
        "model": model,
        "prompt": prompt,
        "max_tokens": 1,
        "temperature": 0.0,
        "logprobs": top,
        "echo": echo,
    })
    .to_string()
}

/// The body of an embeddings request.
pub fn embeddings_request(model: &str, texts: &[&str]) -> String {
    json!({ "model": model, "input": texts }).to_string()
}

/// Why a chat reply ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FinishReason {
    /// The model ended its turn, or a stop string came.
    Stop,
    /// `max_tokens` was reached.
    Length,
    /// The host gave another reason or none.
    Other,
}

fn finish_reason(v: &Value) -> FinishReason {
    match v.as_str() {
        Some("stop") | Some("eos") => FinishReason::Stop,
        Some("length") => FinishReason::Length,
        _ => FinishReason::Other,
    }
}

fn bad(message: impl Into<String>) -> Error {
    Error::RemoteBadReply { message: message.into() }
}

fn parse_json(body: &str) -> Result<Value, Error> {
    serde_json::from_str(body).map_err(|e| bad(format!("not JSON ({e})")))
}

/// The reply's JSON when its status is a success, else the API's error.
pub fn success_json(reply: &HttpReply) -> Result<Value, Error> {
    if !(200..300).contains(&reply.status) {
        return Err(status_error(reply.status, &reply.body));
    }
    parse_json(&reply.body)
}

/// The error a reply with a failing status stands for: the API's `{"error": {"code",
/// "message"}}` when it has one (the message cut to 300 characters), else the start of
/// the body.
pub fn status_error(status: u16, body: &str) -> Error {
    let parsed: Option<Value> = serde_json::from_str(body).ok();
    let error = parsed.as_ref().map(|v| v.get("error").unwrap_or(v));
    let code = error.and_then(|e| e.get("code")).and_then(|c| match c {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        _ => None,
    });
    let message = match error.and_then(|e| e.get("message")).and_then(Value::as_str) {
        Some(m) => m.to_string(),
        None => body.trim().to_string(),
    };
    let message: String = message.chars().take(300).collect();
    Error::RemoteStatus { status, code, message: if message.is_empty() { "(no message)".into() } else { message } }
}

/// One event of a streamed chat reply: the text it adds and, on the last, why it ended.
#[derive(Clone, Debug, PartialEq)]
pub enum StreamEvent {
    /// More of the reply (possibly empty), and the finish reason if this is the last.
    Delta {
        /// The text added.
        text: String,
        /// Set on the last chunk.
        finish: Option<FinishReason>,
    },
    /// `[DONE]`: the stream ends.
    Done,
}

/// Read one event's data of a streamed chat reply. A host that reports an error inside
/// the stream (`{"error": …}`, as the edge worker does when its upstream goes quiet) gives
/// that error.
pub fn read_stream_event(data: &str) -> Result<StreamEvent, Error> {
    if data.trim() == "[DONE]" {
        return Ok(StreamEvent::Done);
    }
    let v = parse_json(data)?;
    if let Some(e) = v.get("error") {
        return Err(status_error(502, &json!({ "error": e }).to_string()));
    }
    let choice = v.get("choices").and_then(|c| c.get(0));
    let text = choice.and_then(|c| c.pointer("/delta/content")).and_then(Value::as_str).unwrap_or("").to_string();
    let finish = choice.map(|c| &c["finish_reason"]).filter(|f| !f.is_null()).map(finish_reason);
    Ok(StreamEvent::Delta { text, finish })
}

/// One token's log-probability, where it starts in the prompt (characters) when the host
/// says, and its likeliest alternatives.
#[derive(Clone, Debug, PartialEq)]
pub struct TokenLogprob {
    /// The token's text.
    pub token: String,
    /// Its natural-log probability (`None` for a prompt's first token, which has no
    /// context).
    pub logprob: Option<f32>,
    /// Where it starts, in characters of the prompt + reply (legacy shape only).
    pub offset: Option<usize>,
    /// The likeliest tokens at this position with their log-probabilities.
    pub top: Vec<(String, f32)>,
}

/// Read each choice's log-probabilities from a completions reply of `prompts` prompts, in
/// prompt order (by each choice's `index`), in either shape.
pub fn read_logprobs_all(v: &Value, prompts: usize) -> Result<Vec<Vec<TokenLogprob>>, Error> {
    let choices = v.get("choices").and_then(Value::as_array).ok_or_else(|| bad("no choices"))?;
    if choices.len() != prompts {
        return Err(bad(format!("{} choices for {prompts} prompts", choices.len())));
    }
    let mut out: Vec<Option<Vec<TokenLogprob>>> = vec![None; prompts];
    for (i, choice) in choices.iter().enumerate() {
        let at = choice.get("index").and_then(Value::as_u64).map_or(i, |n| n as usize);
        let slot = out.get_mut(at).ok_or_else(|| bad(format!("choice index {at} out of range")))?;
        *slot = Some(choice_logprobs(choice)?);
    }
    out.into_iter().map(|c| c.ok_or_else(|| bad("a prompt has no choice"))).collect()
}

/// Read the first choice's log-probabilities from a completions reply, in either shape.
pub fn read_logprobs(v: &Value) -> Result<Vec<TokenLogprob>, Error> {
    choice_logprobs(v.pointer("/choices/0").ok_or_else(|| bad("no choices"))?)
}

fn choice_logprobs(choice: &Value) -> Result<Vec<TokenLogprob>, Error> {
    let lp = choice.get("logprobs").ok_or_else(|| bad("a choice has no logprobs"))?;
    if lp.is_null() {
        return Err(bad("a choice's logprobs is null (the host returned no log-probabilities)"));
    }
    let f = |x: &Value| x.as_f64().map(|f| f as f32);
    if let Some(content) = lp.get("content").and_then(Value::as_array) {
        return Ok(content
            .iter()
            .map(|t| TokenLogprob {
                token: t["token"].as_str().unwrap_or("").to_string(),
                logprob: f(&t["logprob"]),
                offset: None,
                top: t["top_logprobs"]
                    .as_array()
                    .map(|a| a.iter().filter_map(|e| Some((e["token"].as_str()?.to_string(), f(&e["logprob"])?))).collect())
                    .unwrap_or_default(),
            })
            .collect());
    }
    let tokens = lp.get("tokens").and_then(Value::as_array).ok_or_else(|| bad("logprobs has neither content nor tokens"))?;
    let logprobs = lp.get("token_logprobs").and_then(Value::as_array).ok_or_else(|| bad("logprobs has no token_logprobs"))?;
    if logprobs.len() != tokens.len() {
        return Err(bad("logprobs.tokens and token_logprobs differ in length"));
    }
    let offsets = lp.get("text_offset").and_then(Value::as_array);
    let tops = lp.get("top_logprobs").and_then(Value::as_array);
    Ok(tokens
        .iter()
        .enumerate()
        .map(|(i, t)| TokenLogprob {
            token: t.as_str().unwrap_or("").to_string(),
            logprob: f(&logprobs[i]),
            offset: offsets.and_then(|o| o.get(i)).and_then(Value::as_u64).map(|n| n as usize),
            top: tops
                .and_then(|a| a.get(i))
                .and_then(Value::as_object)
                .map(|m| m.iter().filter_map(|(k, x)| Some((k.clone(), f(x)?))).collect())
                .unwrap_or_default(),
        })
        .collect())
}

/// Read an embeddings reply: one vector per input, in input order (by each item's
/// `index` when given).
pub fn read_embeddings(v: &Value, expected: usize) -> Result<Vec<Vec<f32>>, Error> {
    let data = v.get("data").and_then(Value::as_array).ok_or_else(|| bad("no data array"))?;
    if data.len() != expected {
        return Err(bad(format!("{} embeddings for {expected} texts", data.len())));
    }
    let mut out = vec![Vec::new(); expected];
    for (i, item) in data.iter().enumerate() {
        let at = item.get("index").and_then(Value::as_u64).map_or(i, |n| n as usize);
        let slot = out.get_mut(at).ok_or_else(|| bad(format!("embedding index {at} out of range")))?;
        let vector = item.get("embedding").and_then(Value::as_array).ok_or_else(|| bad("an item has no embedding array"))?;
        *slot = vector
            .iter()
            .map(|x| x.as_f64().map(|f| f as f32).ok_or_else(|| bad("an embedding holds a non-number")))
            .collect::<Result<_, _>>()?;
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_keep_the_hosts_code_and_message() {
        let e = status_error(429, r#"{"error":{"code":"rate_limited","message":"slow down","type":"docmem_worker"}}"#);
        assert!(
            matches!(&e, Error::RemoteStatus { status: 429, code: Some(c), message } if c == "rate_limited" && message == "slow down"),
            "{e}"
        );
        let e = status_error(502, "Bad Gateway");
        assert!(matches!(&e, Error::RemoteStatus { status: 502, code: None, message } if message == "Bad Gateway"), "{e}");
    }

    #[test]
    fn both_logprob_shapes_are_read() {
        let legacy: Value = serde_json::from_str(
            r#"{"choices":[{"logprobs":{"tokens":["The"," cat"],"token_logprobs":[null,-1.5],"top_logprobs":[null,{" cat":-1.5," dog":-2.0}],"text_offset":[0,3]}}]}"#,
        )
        .unwrap();
        let got = read_logprobs(&legacy).unwrap();
        assert_eq!(got[0].logprob, None);
        assert_eq!(got[1].logprob, Some(-1.5));
        assert_eq!(got[1].offset, Some(3));
        assert!(got[1].top.contains(&(" dog".to_string(), -2.0)));
        let chat: Value = serde_json::from_str(
            r#"{"choices":[{"logprobs":{"content":[{"token":" one","logprob":-0.25,"top_logprobs":[{"token":" one","logprob":-0.25},{"token":" two","logprob":-1.75}]}]}}]}"#,
        )
        .unwrap();
        let got = read_logprobs(&chat).unwrap();
        assert_eq!(got[0].top, vec![(" one".to_string(), -0.25), (" two".to_string(), -1.75)]);
    }

    #[test]
    fn stream_events_and_in_stream_errors() {
        assert_eq!(read_stream_event("[DONE]").unwrap(), StreamEvent::Done);
        assert_eq!(
            read_stream_event(r#"{"choices":[{"delta":{"content":"Hi"},"finish_reason":null}]}"#).unwrap(),
            StreamEvent::Delta { text: "Hi".into(), finish: None }
        );
        assert_eq!(
            read_stream_event(r#"{"choices":[{"delta":{},"finish_reason":"length"}]}"#).unwrap(),
            StreamEvent::Delta { text: String::new(), finish: Some(FinishReason::Length) }
        );
        let e = read_stream_event(r#"{"error":{"code":"upstream_timeout","message":"quiet"}}"#).unwrap_err();
        assert!(matches!(e, Error::RemoteStatus { code: Some(c), .. } if c == "upstream_timeout"));
    }

    #[test]
    fn embeddings_come_back_in_input_order() {
        let v: Value = serde_json::from_str(r#"{"data":[{"index":1,"embedding":[0.0,1.0]},{"index":0,"embedding":[1.0,0.0]}]}"#).unwrap();
        assert_eq!(read_embeddings(&v, 2).unwrap(), vec![vec![1.0, 0.0], vec![0.0, 1.0]]);
        assert!(read_embeddings(&v, 3).is_err());
        let v: Value = serde_json::from_str(r#"{"data":[{"index":7,"embedding":[1.0]}]}"#).unwrap();
        assert!(read_embeddings(&v, 1).is_err());
    }
}
