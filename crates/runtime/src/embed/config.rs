//! What a sentence-embedding model directory says about itself, read the way
//! sentence-transformers reads it, so the same files give the same vectors.
//!
//! - `config.json`: the encoder's shape (layers, heads, widths, `layer_norm_eps`) and
//!   architecture: `bert` (MiniLM, bge, e5) or `xlm-roberta` (multilingual-e5,
//!   paraphrase-multilingual-MiniLM), whose position ids start after the padding index.
//! - `modules.json` → the pooling module's `config.json` (`1_Pooling/` by convention):
//!   CLS, mean, max or mean-sqrt-len pooling. Without it, mean pooling (what
//!   sentence-transformers does for a plain Hugging Face model).
//! - `sentence_bert_config.json` → `max_seq_length`; without it, the smaller of
//!   `max_position_embeddings` and `tokenizer_config.json`'s `model_max_length` (again
//!   sentence-transformers' rule).
//! - `config_sentence_transformers.json` → `prompts` (`query`, `passage`/`document`): the
//!   prefixes of models such as e5 (`query: `, `passage: `).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::Error;

/// Where a model's files come from: a directory natively, the bytes a page or worker
/// handed over in wasm.
pub trait ModelFiles {
    /// The file's bytes, `None` when the model has no such file.
    fn read(&self, name: &str) -> Result<Option<Vec<u8>>, Error>;
    /// How to name the file in a message.
    fn describe(&self, name: &str) -> String;
    /// The model's own name where the files do not say it (a directory's name).
    fn model_name(&self) -> String {
        String::new()
    }
}

/// A model directory.
#[derive(Clone, Debug)]
pub struct DirFiles(pub PathBuf);

impl ModelFiles for DirFiles {
    fn read(&self, name: &str) -> Result<Option<Vec<u8>>, Error> {
        let path = self.0.join(name);
        match std::fs::read(&path) {
            Ok(bytes) => Ok(Some(bytes)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(Error::MissingFile { path: path.display().to_string(), reason: e.to_string() }),
        }
    }

    fn describe(&self, name: &str) -> String {
        self.0.join(name).display().to_string()
    }

    fn model_name(&self) -> String {
        self.0.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default()
    }
}

/// Files held in memory by name (`config.json`, `1_Pooling/config.json`, ...).
impl ModelFiles for BTreeMap<String, Vec<u8>> {
    fn read(&self, name: &str) -> Result<Option<Vec<u8>>, Error> {
        Ok(self.get(name).cloned())
    }

    fn describe(&self, name: &str) -> String {
        name.to_owned()
    }
}

/// The BERT encoder's shape.
#[derive(Clone, Debug, PartialEq)]
pub struct BertShape {
    /// Vocabulary size.
    pub vocab: usize,
    /// Hidden width.
    pub hidden: usize,
    /// Encoder layers.
    pub layers: usize,
    /// Attention heads.
    pub heads: usize,
    /// Feed-forward width.
    pub intermediate: usize,
    /// Position embeddings.
    pub max_positions: usize,
    /// Token-type embeddings.
    pub type_vocab: usize,
    /// LayerNorm epsilon.
    pub layer_norm_eps: f64,
    /// The position id of a sequence's first token: 0 for BERT; RoBERTa-family models
    /// number positions from `pad_token_id + 1`.
    pub position_offset: usize,
}

/// How token vectors become one sentence vector.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Pooling {
    /// The first token's vector (`[CLS]`), as bge models use.
    Cls,
    /// The mean over real (unpadded) tokens, as MiniLM and e5 models use.
    Mean,
    /// The element-wise maximum over real tokens.
    Max,
    /// The sum over real tokens divided by the square root of their count.
    MeanSqrtLen,
    /// The last real token's vector, as decoder-based embedders (e5-mistral, gte-Qwen) use.
    Last,
}

/// Everything needed to load and run a model.
#[derive(Clone, Debug, PartialEq)]
pub struct EmbedderConfig {
    /// The encoder's shape.
    pub shape: BertShape,
    /// The pooling.
    pub pooling: Pooling,
    /// Longest input in tokens (special tokens included); longer inputs are truncated.
    pub max_tokens: usize,
    /// Prefix of query texts.
    pub query_prefix: String,
    /// Prefix of passage texts.
    pub passage_prefix: String,
}

fn read_json(files: &dyn ModelFiles, file: &str) -> Result<Option<Value>, Error> {
    match files.read(file)? {
        Some(bytes) => {
            serde_json::from_slice(&bytes).map(Some).map_err(|e| Error::BadConfig { file: files.describe(file), reason: e.to_string() })
        }
        None => Ok(None),
    }
}

impl EmbedderConfig {
    /// Read a model directory's configuration files.
    pub fn read(dir: &Path) -> Result<Self, Error> {
        Self::from_files(&DirFiles(dir.to_owned()))
    }

    /// Read a model's configuration files from wherever they are.
    pub fn from_files(files: &dyn ModelFiles) -> Result<Self, Error> {
        let config_path = files.describe("config.json");
        let config =
            read_json(files, "config.json")?.ok_or_else(|| Error::MissingFile { path: config_path.clone(), reason: "not found".into() })?;
        let shape = BertShape::from_config(&config, &config_path)?;
        let pooling = read_pooling(files)?;
        let max_tokens = match read_json(files, "sentence_bert_config.json")?.and_then(|c| c.get("max_seq_length")?.as_u64()) {
            Some(n) => n as usize,
            None => {
                let tokenizer_max = read_json(files, "tokenizer_config.json")?
                    .and_then(|c| c.get("model_max_length")?.as_f64())
                    .filter(|n| *n >= 1.0 && *n < 1e9)
                    .map(|n| n as usize);
                tokenizer_max.map_or(shape.max_positions, |t| t.min(shape.max_positions))
            }
        }
        // Positions past the table cannot be embedded (RoBERTa's offset uses some up).
        .min(shape.max_positions - shape.position_offset)
        .max(1);
        let prompts = read_json(files, "config_sentence_transformers.json")?.and_then(|c| c.get("prompts").cloned());
        let prompt = |keys: &[&str]| -> String {
            keys.iter().find_map(|k| prompts.as_ref()?.get(*k)?.as_str().map(str::to_owned)).unwrap_or_default()
        };
        let (mut query_prefix, mut passage_prefix) = (prompt(&["query"]), prompt(&["passage", "document"]));
        if prompts.is_none() {
            let name = config.get("_name_or_path").and_then(Value::as_str).map_or_else(|| files.model_name(), str::to_owned);
            (query_prefix, passage_prefix) = conventional_prefixes(&name);
        }
        Ok(EmbedderConfig { shape, pooling, max_tokens, query_prefix, passage_prefix })
    }
}

impl BertShape {
    /// How many weights an encoder of this shape has (`None` past `u64`): checked against
    /// the file that should hold them before anything is allocated for them, since every
    /// width here comes from the configuration.
    pub fn parameters(&self) -> Option<u64> {
        let [v, h, l, i, p, t] =
            [self.vocab, self.hidden, self.layers, self.intermediate, self.max_positions, self.type_vocab].map(|x| x as u64);
        // Embeddings and their norm; per layer Q, K, V and the output (weights and biases),
        // two norms, and the feed-forward up and down.
        let embeddings = v.checked_add(p)?.checked_add(t)?.checked_add(2)?.checked_mul(h)?;
        let per_layer = h
            .checked_mul(h)?
            .checked_mul(4)?
            .checked_add(h.checked_mul(8)?)?
            .checked_add(h.checked_mul(i)?.checked_mul(2)?)?
            .checked_add(i.checked_add(h)?)?;
        embeddings.checked_add(per_layer.checked_mul(l)?)
    }

    /// From a Hugging Face `config.json` of a BERT model.
    pub fn from_config(c: &Value, file: &str) -> Result<Self, Error> {
        let kind = c.get("model_type").and_then(Value::as_str).unwrap_or("");
        let position_offset = match kind {
            "bert" => 0,
            // RoBERTa numbers positions after the padding index (`padding_idx + 1`).
            "xlm-roberta" | "roberta" => c.get("pad_token_id").and_then(Value::as_u64).unwrap_or(1) as usize + 1,
            _ => {
                return Err(Error::UnsupportedEmbedder {
                    what: format!("model_type '{kind}' (bert and xlm-roberta encoders are supported)"),
                })
            }
        };
        let act = c.get("hidden_act").and_then(Value::as_str).unwrap_or("gelu");
        if act != "gelu" {
            return Err(Error::UnsupportedEmbedder { what: format!("hidden_act '{act}' (gelu is supported)") });
        }
        if let Some(p) = c.get("position_embedding_type").and_then(Value::as_str) {
            if p != "absolute" {
                return Err(Error::UnsupportedEmbedder { what: format!("position_embedding_type '{p}'") });
            }
        }
        let field = |k: &str| -> Result<usize, Error> {
            c.get(k)
                .and_then(Value::as_u64)
                .filter(|v| *v > 0 && *v < 1 << 24)
                .map(|v| v as usize)
                .ok_or_else(|| Error::BadConfig { file: file.to_owned(), reason: format!("'{k}' is missing or not a positive integer") })
        };
        let shape = BertShape {
            vocab: field("vocab_size")?,
            hidden: field("hidden_size")?,
            layers: field("num_hidden_layers")?,
            heads: field("num_attention_heads")?,
            intermediate: field("intermediate_size")?,
            max_positions: field("max_position_embeddings")?,
            type_vocab: field("type_vocab_size")?,
            layer_norm_eps: c.get("layer_norm_eps").and_then(Value::as_f64).unwrap_or(1e-12),
            position_offset,
        };
        if shape.position_offset >= shape.max_positions {
            return Err(Error::BadConfig {
                file: file.to_owned(),
                reason: format!("pad_token_id leaves no positions of {}", shape.max_positions),
            });
        }
        if !shape.hidden.is_multiple_of(shape.heads) {
            return Err(Error::BadConfig {
                file: file.to_owned(),
                reason: format!("hidden_size {} is not a multiple of num_attention_heads {}", shape.hidden, shape.heads),
            });
        }
        Ok(shape)
    }
}

/// The prefixes a model family's card asks for when its files do not carry them (older
/// e5 and bge uploads have no `config_sentence_transformers.json` prompts), by model name.
fn conventional_prefixes(name: &str) -> (String, String) {
    let name = name.to_ascii_lowercase();
    let base = name.rsplit('/').next().unwrap_or(&name);
    if base.starts_with("e5-") || base.starts_with("multilingual-e5-") {
        ("query: ".to_owned(), "passage: ".to_owned())
    } else if base.starts_with("bge-") && base.contains("-en") {
        ("Represent this sentence for searching relevant passages: ".to_owned(), String::new())
    } else {
        (String::new(), String::new())
    }
}

/// The pooling named by `modules.json`'s pooling module (mean when there is none).
fn read_pooling(files: &dyn ModelFiles) -> Result<Pooling, Error> {
    let Some(modules) = read_json(files, "modules.json")? else { return Ok(Pooling::Mean) };
    let path = modules.as_array().into_iter().flatten().find_map(|m| {
        let kind = m.get("type")?.as_str()?;
        kind.ends_with(".Pooling").then(|| m.get("path").and_then(Value::as_str).unwrap_or("1_Pooling").to_owned())
    });
    let Some(path) = path else { return Ok(Pooling::Mean) };
    let file = format!("{path}/config.json");
    let Some(c) = read_json(files, &file)? else { return Ok(Pooling::Mean) };
    let on = |k: &str| c.get(k).and_then(Value::as_bool).unwrap_or(false);
    let chosen: Vec<Pooling> = [
        ("pooling_mode_cls_token", Pooling::Cls),
        ("pooling_mode_mean_tokens", Pooling::Mean),
        ("pooling_mode_max_tokens", Pooling::Max),
        ("pooling_mode_mean_sqrt_len_tokens", Pooling::MeanSqrtLen),
        ("pooling_mode_lasttoken", Pooling::Last),
    ]
    .into_iter()
    .filter(|(k, _)| on(k))
    .map(|(_, p)| p)
    .collect();
    match chosen.as_slice() {
        [one] => Ok(*one),
        [] => Err(Error::BadConfig { file, reason: "no pooling mode is set".into() }),
        _ => Err(Error::UnsupportedEmbedder { what: format!("{file}: several pooling modes at once (concatenated vectors)") }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dir_with(files: &[(&str, &str)]) -> std::path::PathBuf {
        static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let dir = std::env::temp_dir().join(format!("docmem-embed-config-{}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        for (name, text) in files {
            let p = dir.join(name);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, text).unwrap();
        }
        dir
    }

    const BERT: &str = r#"{"model_type":"bert","hidden_act":"gelu","vocab_size":100,"hidden_size":32,"num_hidden_layers":2,
        "num_attention_heads":4,"intermediate_size":64,"max_position_embeddings":512,"type_vocab_size":2,"layer_norm_eps":1e-12}"#;

    #[test]
    fn reads_pooling_length_and_prompts_as_sentence_transformers_does() {
        let dir = dir_with(&[
            ("config.json", BERT),
            (
                "modules.json",
                r#"[{"idx":0,"path":"","type":"sentence_transformers.models.Transformer"},{"idx":1,"path":"1_Pooling","type":"sentence_transformers.models.Pooling"}]"#,
            ),
            ("1_Pooling/config.json", r#"{"pooling_mode_cls_token":true,"pooling_mode_mean_tokens":false}"#),
            ("tokenizer_config.json", r#"{"model_max_length":256}"#),
            ("config_sentence_transformers.json", r#"{"prompts":{"query":"query: ","passage":"passage: "}}"#),
        ]);
        let c = EmbedderConfig::read(&dir).unwrap();
        assert_eq!((c.pooling, c.max_tokens), (Pooling::Cls, 256));
        assert_eq!((c.query_prefix.as_str(), c.passage_prefix.as_str()), ("query: ", "passage: "));
        assert_eq!(c.shape.heads, 4);
    }

    #[test]
    fn e5_and_bge_get_their_prefixes_by_name_when_the_files_do_not_say() {
        assert_eq!(conventional_prefixes("intfloat/multilingual-e5-small"), ("query: ".into(), "passage: ".into()));
        assert_eq!(conventional_prefixes("e5-small-v2"), ("query: ".into(), "passage: ".into()));
        assert!(conventional_prefixes("BAAI/bge-small-en-v1.5").0.starts_with("Represent this sentence"));
        assert_eq!(conventional_prefixes("all-MiniLM-L6-v2"), (String::new(), String::new()));
        let dir = dir_with(&[("config.json", &BERT.replace("{", r#"{"_name_or_path":"intfloat/e5-small-v2","#))]);
        assert_eq!(EmbedderConfig::read(&dir).unwrap().query_prefix, "query: ");
    }

    #[test]
    fn xlm_roberta_positions_start_after_the_padding_index_and_files_may_be_in_memory() {
        let xlmr = BERT.replace("\"bert\"", "\"xlm-roberta\"").replace("{", r#"{"pad_token_id":1,"#);
        let files: BTreeMap<String, Vec<u8>> = [
            ("config.json".to_owned(), xlmr.into_bytes()),
            ("modules.json".to_owned(), br#"[{"path":"1_Pooling","type":"sentence_transformers.models.Pooling"}]"#.to_vec()),
            ("1_Pooling/config.json".to_owned(), br#"{"pooling_mode_lasttoken":true}"#.to_vec()),
        ]
        .into_iter()
        .collect();
        let c = EmbedderConfig::from_files(&files).unwrap();
        assert_eq!((c.shape.position_offset, c.max_tokens, c.pooling), (2, 510, Pooling::Last));
    }

    #[test]
    fn bad_or_unsupported_configs_are_named() {
        let dir = dir_with(&[("config.json", r#"{"model_type":"t5"}"#)]);
        let e = EmbedderConfig::read(&dir).unwrap_err().to_string();
        assert!(e.contains("model_type 't5'"), "{e}");
        let dir = dir_with(&[("config.json", &BERT.replace("\"hidden_size\":32", "\"hidden_size\":30")), ("x", "")]);
        let e = EmbedderConfig::read(&dir).unwrap_err().to_string();
        assert!(e.contains("not a multiple"), "{e}");
        let e = EmbedderConfig::read(Path::new("/nonexistent-docmem")).unwrap_err().to_string();
        assert!(e.contains("config.json"), "{e}");
    }
}
