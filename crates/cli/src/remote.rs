//! Hosted models for the CLI: `remote:NAME` in place of a model file for `--reader`,
//! `--scorer`, `--answerer` or `--embedder` sends that role's text to the host named by
//! `--remote` (the edge worker, or any OpenAI-compatible server), with the bearer token
//! from `--remote-token` or `$DOCMEM_REMOTE_TOKEN`.
//!
//! The HTTP client is ureq (blocking, rustls): the CLI waits on one request at a time, so
//! an async client would buy nothing, and rustls needs no system TLS library. Each role
//! that sends text says so on stderr before it does: nothing leaves the device unasked.

use std::io::Read;
use std::ops::ControlFlow;
use std::path::Path;
use std::rc::Rc;
use std::time::Duration;

use clap::Args;
use docmem_core::local_future::{boxed, LocalBoxFuture};
use docmem_runtime::remote::retry::{Outcome, Retries};
use docmem_runtime::remote::{HttpReply, Transport, DEFAULT_REMOTE_CONTEXT};

use crate::CliError;

/// Where `remote:NAME` models are served.
#[derive(Args, Debug, Clone)]
pub struct RemoteArgs {
    /// The host of `remote:NAME` models: the docmem edge worker or any OpenAI-compatible
    /// server, by its base URL (e.g. https://docmem.example.workers.dev). Text given to a
    /// remote model leaves this device.
    #[arg(long)]
    pub remote: Option<String>,
    /// The bearer token for --remote [default: $DOCMEM_REMOTE_TOKEN]. The environment is
    /// the safer place: arguments show in the process list.
    #[arg(long)]
    pub remote_token: Option<String>,
    /// The context window assumed for remote models, in tokens (the API does not say).
    #[arg(long, default_value_t = DEFAULT_REMOTE_CONTEXT)]
    pub remote_context: usize,
    /// Allow a plain http:// --remote that is not this machine (the token and the text
    /// then cross the network unencrypted; for a host on a network you trust).
    #[arg(long)]
    pub remote_allow_http: bool,
}

/// `NAME` when `arg` is `remote:NAME`.
pub fn remote_name(arg: &Path) -> Option<&str> {
    arg.to_str()?.strip_prefix("remote:").filter(|n| !n.is_empty())
}

impl RemoteArgs {
    /// The transport to --remote, for `role` (a flag's name) using `model`; says on stderr
    /// what leaves the device.
    pub fn transport(&self, role: &str, model: &str, what_leaves: &str) -> Result<Rc<HttpTransport>, CliError> {
        let Some(url) = &self.remote else {
            return Err(CliError::BadArgument {
                message: format!("--{role} remote:{model} needs --remote URL (the edge worker or an OpenAI-compatible host)"),
            });
        };
        let token = self.remote_token.clone().or_else(|| std::env::var("DOCMEM_REMOTE_TOKEN").ok()).filter(|t| !t.is_empty());
        let transport = HttpTransport::new(url, token, self.remote_allow_http)?;
        eprintln!("docmem: the {role} is the hosted model '{model}' at {}: {what_leaves} leave this device", transport.base);
        Ok(Rc::new(transport))
    }
}

/// Whether the host of `authority_and_path` (what follows `http://`) is this machine.
fn is_loopback(authority_and_path: &str) -> bool {
    let authority = authority_and_path.split('/').next().unwrap_or("");
    let host = match authority.strip_prefix('[') {
        Some(v6) => v6.split(']').next().unwrap_or(""),
        None => authority.split(':').next().unwrap_or(""),
    };
    host == "localhost" || host == "::1" || host.parse::<std::net::Ipv4Addr>().is_ok_and(|ip| ip.is_loopback())
}

/// POSTs JSON to one base URL with a bearer token, over ureq.
#[derive(Debug)]
pub struct HttpTransport {
    agent: ureq::Agent,
    base: String,
    token: Option<String>,
}

impl HttpTransport {
    /// A transport to `url` (`https://`, or `http://` to this machine unless `allow_http`;
    /// a trailing `/v1` or `/` is dropped, as the API's paths carry it).
    pub fn new(url: &str, token: Option<String>, allow_http: bool) -> Result<Self, CliError> {
        let trimmed = url.trim().trim_end_matches('/');
        let base = trimmed.strip_suffix("/v1").unwrap_or(trimmed).to_string();
        let Some((scheme, rest)) = base.split_once("://").filter(|(s, r)| (*s == "http" || *s == "https") && !r.is_empty()) else {
            return Err(CliError::BadArgument { message: format!("--remote: '{url}' is not an http:// or https:// URL") });
        };
        if scheme == "http" && !allow_http && !is_loopback(rest) {
            return Err(CliError::BadArgument {
                message: format!(
                    "--remote: '{url}' is plain http to another machine: the token and the documents would cross the network unencrypted (use https://, or --remote-allow-http for a network you trust)"
                ),
            });
        }
        let config = ureq::Agent::config_builder()
            // Error statuses come back as replies: their JSON names what was wrong.
            .http_status_as_error(false)
            .timeout_connect(Some(Duration::from_secs(30)))
            // A reader writing 768 tokens with a 7B model takes a minute or two.
            .timeout_recv_response(Some(Duration::from_secs(600)))
            .timeout_recv_body(Some(Duration::from_secs(600)))
            .build();
        Ok(HttpTransport { agent: config.into(), base, token })
    }

    /// POST until the reply's headers, sending the request again as `remote::retry` decides:
    /// a rate limit (429) is waited out for its `Retry-After`, a 502, a 503 or no reply at
    /// all is tried twice more after a short wait, so one dropped connection does not fail
    /// a whole ingest.
    fn send(&self, path: &str, body: &str) -> Result<ureq::http::Response<ureq::Body>, docmem_runtime::Error> {
        let mut retries = Retries::default();
        loop {
            let mut request = self.agent.post(format!("{}{path}", self.base)).header("Content-Type", "application/json");
            if let Some(token) = &self.token {
                request = request.header("Authorization", format!("Bearer {token}"));
            }
            let sent = request.send(body);
            let outcome = match &sent {
                Ok(response) => Some(Outcome::Reply {
                    status: response.status().as_u16(),
                    retry_after: response.headers().get("retry-after").and_then(|v| v.to_str().ok()),
                }),
                // A timeout has already waited (30 s to connect, up to ten minutes for the
                // reply's headers): it is final.
                Err(ureq::Error::Timeout(_)) => None,
                Err(_) => Some(Outcome::NoReply),
            };
            let Some(wait) = outcome.and_then(|outcome| retries.next(outcome)) else {
                return sent.map_err(|e| docmem_runtime::Error::RemoteTransport { message: e.to_string() });
            };
            // The refused reply's body is dropped unread: ureq closes that connection.
            drop(sent);
            std::thread::sleep(wait);
        }
    }

    fn whole(&self, path: &str, body: &str) -> Result<HttpReply, docmem_runtime::Error> {
        let mut response = self.send(path, body)?;
        let status = response.status().as_u16();
        let body = response.body_mut().read_to_string().map_err(|e| docmem_runtime::Error::RemoteTransport { message: e.to_string() })?;
        Ok(HttpReply { status, body })
    }
}

impl Transport for HttpTransport {
    fn post<'a>(&'a self, path: &'a str, body: &'a str) -> LocalBoxFuture<'a, Result<HttpReply, docmem_runtime::Error>> {
        boxed(async move { self.whole(path, body) })
    }

    fn post_streaming<'a>(
        &'a self,
        path: &'a str,
        body: &'a str,
        on_bytes: &'a mut dyn FnMut(&[u8]) -> ControlFlow<()>,
    ) -> LocalBoxFuture<'a, Result<HttpReply, docmem_runtime::Error>> {
        boxed(async move {
            let mut response = self.send(path, body)?;
            let status = response.status().as_u16();
            if !response.status().is_success() {
                let body =
                    response.body_mut().read_to_string().map_err(|e| docmem_runtime::Error::RemoteTransport { message: e.to_string() })?;
                return Ok(HttpReply { status, body });
            }
            let mut reader = response.body_mut().as_reader();
            let mut buf = [0u8; 8192];
            loop {
                let n = reader.read(&mut buf).map_err(|e| docmem_runtime::Error::RemoteTransport { message: e.to_string() })?;
                // Breaking drops the reader before the body's end: ureq closes the
                // connection rather than reuse it, so the host sees the client go.
                if n == 0 || on_bytes(&buf[..n]).is_break() {
                    break;
                }
            }
            Ok(HttpReply { status, body: String::new() })
        })
    }

    fn post_blocking(&self, path: &str, body: &str) -> Result<HttpReply, docmem_runtime::Error> {
        self.whole(path, body)
    }
}
