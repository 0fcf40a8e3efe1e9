//! SentencePiece (`tokenizer.ggml.model = llama`) as a BPE with byte fallback.
//!
//! llama.cpp's SPM tokenizer merges the adjacent pair whose merged piece has the highest
//! score, and falls back to `<0xXX>` byte tokens for text no piece covers. A BPE whose
//! merge ranks follow those scores does the same, which is how HF converts these models:
//! every piece that splits into two pieces of the vocabulary yields a merge, ranked by the
//! merged piece's score. Spaces become `▁`, and a `▁` is prefixed to the text where the file
//! asks (`tokenizer.ggml.add_space_prefix`: Llama 2's do, Gemma's do not), as llama.cpp does.

use tokenizers::decoders::byte_fallback::ByteFallback;
use tokenizers::decoders::fuse::Fuse;
use tokenizers::decoders::sequence::Sequence as DecoderSequence;
use tokenizers::decoders::strip::Strip;
use tokenizers::decoders::DecoderWrapper;
use tokenizers::models::bpe::{Vocab, BPE};
use tokenizers::normalizers::{NormalizerWrapper, Prepend, Replace, Sequence as NormalizerSequence};
use tokenizers::Tokenizer as HfTokenizer;

use super::lib_err;
use crate::Error;

const SPACE: &str = "\u{2581}";

/// Build the BPE equivalent of a SentencePiece vocabulary.
pub(super) fn build(tokens: &[String], scores: &[f32], _types: &[i64], add_space_prefix: bool) -> Result<HfTokenizer, Error> {
    if scores.len() != tokens.len() {
        return Err(Error::TokenizerLengthMismatch { key: "tokenizer.ggml.scores", tokens: tokens.len(), found: scores.len() });
    }
    let vocab: Vocab = tokens.iter().enumerate().map(|(i, t)| (t.clone(), i as u32)).collect();
    // Both halves of a merge are pieces, so a cut is worth a look-up only where both
    // halves have the length of some piece. Without this filter every cut of every piece
    // was hashed: quadratic in a piece's length, and a model file with one 1 MB token
    // took minutes to load (a fuzz finding).
    let lengths: std::collections::HashSet<usize> = tokens.iter().map(String::len).collect();
    let mut ranked: Vec<(f32, u32, String, String)> = Vec::new();
    for (id, piece) in tokens.iter().enumerate() {
        let cuts = piece.char_indices().map(|(i, _)| i).skip(1);
        for cut in cuts.filter(|&cut| lengths.contains(&cut) && lengths.contains(&(piece.len() - cut))) {
            let (a, b) = piece.split_at(cut);
            if vocab.contains_key(a) && vocab.contains_key(b) {
                ranked.push((scores[id], id as u32, a.to_owned(), b.to_owned()));
            }
        }
    }
    // Highest score first; ties by the merged piece's id, then by the left piece's id.
    ranked.sort_by(|x, y| y.0.total_cmp(&x.0).then(x.1.cmp(&y.1)).then(vocab[&x.2].cmp(&vocab[&y.2])));
    let merges = ranked.into_iter().map(|(_, _, a, b)| (a, b)).collect();
    let mut builder = BPE::builder().vocab_and_merges(vocab.clone(), merges).byte_fallback(true).fuse_unk(true);
    if vocab.contains_key("<unk>") {
        builder = builder.unk_token("<unk>".to_owned());
    }
    let bpe = builder.build().map_err(lib_err)?;
    let mut t = HfTokenizer::new(bpe);
    let mut normalizers = vec![NormalizerWrapper::Replace(Replace::new(" ", SPACE).map_err(lib_err)?)];
    let mut decoders = vec![
        DecoderWrapper::Replace(tokenizers::normalizers::Replace::new(SPACE, " ").map_err(lib_err)?),
        DecoderWrapper::ByteFallback(ByteFallback::new()),
        DecoderWrapper::Fuse(Fuse::new()),
    ];
    // The prefixed space is taken off again when decoding.
    if add_space_prefix {
        normalizers.insert(0, NormalizerWrapper::Prepend(Prepend::new(SPACE.to_owned())));
        decoders.push(DecoderWrapper::Strip(Strip::new(' ', 1, 0)));
    }
    t.with_normalizer(Some(NormalizerSequence::new(normalizers)));
    t.with_decoder(Some(DecoderWrapper::Sequence(DecoderSequence::new(decoders))));
    Ok(t)
}

/// The bytes a SentencePiece piece stands for: `<0xAB>` is one byte, `▁` a space.
pub(super) fn piece_bytes(piece: &str) -> Vec<u8> {
    if let Some(hex) = piece.strip_prefix("<0x").and_then(|s| s.strip_suffix('>')) {
        if let Ok(b) = u8::from_str_radix(hex, 16) {
            return vec![b];
        }
    }
    piece.replace(SPACE, " ").into_bytes()
}
