//! Hosted models from the command line (`remote:NAME` with `--remote`), against a small
//! OpenAI-compatible server written here on std's TcpListener: the requests docmem sends,
//! the bearer token, streamed answers, the notice that text leaves the device, and the
//! errors a refusing host gives. (The edge worker in front of a real llama.cpp server is
//! tested end to end by `scripts/worker-test.sh`.)

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::{Arc, Mutex};
use std::thread;

/// What the server saw: (path, authorization header, body) per request.
type Seen = Arc<Mutex<Vec<(String, String, String)>>>;

/// How the server fails a request before it answers the next ones.
#[derive(Clone, Copy, Debug)]
enum Failure {
    /// The connection is closed with no reply (as a host that restarts, or a pooled
    /// connection the host had just closed).
    NoReply,
    /// 502, as the edge worker answers when it could not reach its upstream.
    Unavailable,
}

/// Serve on 127.0.0.1 until the test ends; the token that is accepted is "sesame".
fn serve() -> (String, Seen) {
    serve_failing(Vec::new())
}

/// As [`serve`], failing the first requests as `failures` says, one each, in order (the
/// failed requests are in `Seen` too).
fn serve_failing(failures: Vec<Failure>) -> (String, Seen) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let seen: Seen = Arc::default();
    let log = seen.clone();
    let failures = Arc::new(Mutex::new(std::collections::VecDeque::from(failures)));
    thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            let (log, failures) = (log.clone(), failures.clone());
            thread::spawn(move || answer(stream, &log, &failures));
        }
    });
    (url, seen)
}

fn answer(mut stream: TcpStream, log: &Seen, failures: &Mutex<std::collections::VecDeque<Failure>>) {
    let mut reader = BufReader::new(stream.try_clone().unwrap());
    let mut line = String::new();
    if reader.read_line(&mut line).is_err() {
        return;
    }
    let path = line.split_whitespace().nth(1).unwrap_or("").to_string();
    let (mut length, mut auth) = (0, String::new());
    loop {
        let mut h = String::new();
        if reader.read_line(&mut h).is_err() || h.trim().is_empty() {
            break;
        }
        let (name, value) = h.split_once(':').unwrap_or((&h, ""));
        match name.to_ascii_lowercase().as_str() {
            "content-length" => length = value.trim().parse().unwrap_or(0),
            "authorization" => auth = value.trim().to_string(),
            _ => {}
        }
    }
    let mut body = vec![0; length];
    let _ = reader.read_exact(&mut body);
    let body = String::from_utf8_lossy(&body).into_owned();
    log.lock().unwrap().push((path.clone(), auth.clone(), body.clone()));
    let respond = |stream: &mut TcpStream, status: &str, kind: &str, text: &str| {
        let _ = write!(
            stream,
            "HTTP/1.1 {status}\r\nContent-Type: {kind}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{text}",
            text.len()
        );
    };
    let failure = failures.lock().unwrap().pop_front();
    match failure {
        Some(Failure::NoReply) => return drop(stream.shutdown(std::net::Shutdown::Both)),
        Some(Failure::Unavailable) => {
            return respond(
                &mut stream,
                "502 Bad Gateway",
                "application/json",
                r#"{"error":{"code":"upstream_unavailable","message":"the upstream could not be reached"}}"#,
            )
        }
        None => {}
    }
    if auth != "Bearer sesame" {
        return respond(
            &mut stream,
            "401 Unauthorized",
            "application/json",
            r#"{"error":{"code":"unauthorized","message":"the token is not valid"}}"#,
        );
    }
    let request: serde_json::Value = serde_json::from_str(&body).unwrap_or_default();
    match path.as_str() {
        "/v1/embeddings" => {
            let data: Vec<_> = request["input"]
                .as_array()
                .unwrap()
                .iter()
                .enumerate()
                .map(|(i, t)| {
                    // A bag of letters: similar texts get similar vectors.
                    let mut v = vec![0.1f32; 8];
                    for b in t.as_str().unwrap().bytes() {
                        v[(b % 8) as usize] += 1.0;
                    }
                    serde_json::json!({"index": i, "embedding": v})
                })
                .collect();
            respond(&mut stream, "200 OK", "application/json", &serde_json::json!({ "data": data }).to_string());
        }
        // Every reply is this one: not a memory, so the reader's reply does not parse and
        // the document falls back to sentence chunks, each given this line as its core.
        "/v1/chat/completions" if request["stream"] == true => {
            let _ = write!(stream, "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n\r\n");
            for piece in ["William ", "Caxton ", "[1]"] {
                let chunk = serde_json::json!({"choices":[{"delta":{"content":piece},"finish_reason":null}]});
                let _ = write!(stream, "data: {chunk}\n\n");
                let _ = stream.flush();
                thread::sleep(std::time::Duration::from_millis(20));
            }
            let _ = write!(stream, "data: {}\n\ndata: [DONE]\n\n", serde_json::json!({"choices":[{"delta":{},"finish_reason":"stop"}]}));
        }
        _ => respond(&mut stream, "404 Not Found", "application/json", r#"{"error":{"code":"not_found","message":"no such path"}}"#),
    }
}

fn docmem(args: &[&str], token: &str) -> Output {
    Command::new(env!("CARGO_BIN_EXE_docmem")).args(args).env("DOCMEM_REMOTE_TOKEN", token).output().expect("run docmem")
}

fn example() -> String {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/printing-press.md").display().to_string()
}

fn temp_library(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("docmem-cli-remote-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    d
}

#[test]
fn a_hosted_reader_embedder_and_answerer_ingest_and_answer() {
    let (url, seen) = serve();
    let lib = temp_library("all");
    let lib_s = lib.display().to_string();
    let remote = ["--remote", url.as_str(), "--embedder", "remote:bag"];
    let mut args = vec!["ingest", "--library", &lib_s, "--reader", "remote:big", "--samples", "0"];
    args.extend(remote);
    let example = example();
    args.push(&example);
    let out = docmem(&args, "sesame");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "ingest failed: {stderr}");
    assert!(stderr.contains("the reader is the hosted model 'big'") && stderr.contains("leave this device"), "{stderr}");
    assert!(stderr.contains("the embedder is the hosted model 'bag'"), "{stderr}");

    let mut args = vec!["ask", "Who brought printing to England?", "--library", &lib_s, "--answerer", "remote:big", "--json"];
    args.extend(remote);
    let out = docmem(&args, "sesame");
    assert!(out.status.success(), "ask failed: {}", String::from_utf8_lossy(&out.stderr));
    let answer: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(answer["answer"], "William Caxton [1]");
    assert_eq!(answer["cited"], serde_json::json!([1]));
    assert_eq!(answer["finish"], "end_of_text");

    let seen = seen.lock().unwrap();
    assert!(seen.iter().all(|(_, auth, _)| auth == "Bearer sesame"), "every request carries the token");
    let document_sent = seen.iter().any(|(p, _, b)| p == "/v1/chat/completions" && b.contains("Caxton") && b.contains("\"model\":\"big\""));
    assert!(document_sent, "the reader was sent the document");
    // Every reply streams (a proxy's time-to-headers limit never cuts a long one).
    let chat: Vec<_> = seen.iter().filter(|(p, _, _)| p == "/v1/chat/completions").collect();
    assert!(chat.len() >= 2 && chat.iter().all(|(_, _, b)| b.contains("\"stream\":true")), "{} chat requests", chat.len());
    assert!(seen.iter().any(|(p, _, _)| p == "/v1/embeddings"));
    let _ = std::fs::remove_dir_all(&lib);
}

#[test]
fn a_dropped_connection_and_a_502_are_tried_again() {
    let (url, seen) = serve_failing(vec![Failure::NoReply, Failure::Unavailable]);
    let lib = temp_library("retried");
    let lib_s = lib.display().to_string();
    let example = example();
    let args = ["ingest", "--library", &lib_s, "--chunker", "sentence", "--embedder", "remote:bag", "--remote", &url, &example];
    let started = std::time::Instant::now();
    let out = docmem(&args, "sesame");
    assert!(out.status.success(), "ingest failed: {}", String::from_utf8_lossy(&out.stderr));
    let seen = seen.lock().unwrap();
    assert!(seen.len() >= 3 && seen[..3].iter().all(|(p, _, _)| p == "/v1/embeddings"), "{seen:?}");
    // Half a second after the dropped connection, a second after the 502.
    assert!(started.elapsed() >= std::time::Duration::from_millis(1500), "{:?}", started.elapsed());

    // A host that keeps failing is reported after the third try.
    let (url, seen) = serve_failing(vec![Failure::Unavailable; 3]);
    let _ = std::fs::remove_dir_all(&lib);
    let args = ["ingest", "--library", &lib_s, "--chunker", "sentence", "--embedder", "remote:bag", "--remote", &url, &example];
    let out = docmem(&args, "sesame");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("502 upstream_unavailable"), "{stderr}");
    assert_eq!(seen.lock().unwrap().len(), 3);
    let _ = std::fs::remove_dir_all(&lib);
}

#[test]
fn a_refused_token_and_a_missing_host_are_clear_errors() {
    let (url, _) = serve();
    let lib = temp_library("refused");
    let lib_s = lib.display().to_string();
    let example = example();
    let out =
        docmem(&["ingest", "--library", &lib_s, "--chunker", "sentence", "--embedder", "remote:bag", "--remote", &url, &example], "wrong");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("401 unauthorized") && stderr.contains("the token is not valid"), "{stderr}");
    assert!(!lib.join("manifest.json").exists(), "nothing was written");

    let out = docmem(&["ingest", "--library", &lib_s, "--chunker", "sentence", "--embedder", "remote:bag", &example], "sesame");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("--remote URL"), "{stderr}");

    let out = docmem(
        &["ingest", "--library", &lib_s, "--chunker", "sentence", "--embedder", "remote:bag", "--remote", "ftp://x", &example],
        "sesame",
    );
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("not an http:// or https:// URL"));
    // Plain http to another machine would send the token and the text in the clear.
    let out = docmem(
        &[
            "ingest",
            "--library",
            &lib_s,
            "--chunker",
            "sentence",
            "--embedder",
            "remote:bag",
            "--remote",
            "http://192.0.2.1:8080",
            &example,
        ],
        "sesame",
    );
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--remote-allow-http"));
    let _ = std::fs::remove_dir_all(&lib);
}
