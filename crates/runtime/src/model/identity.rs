//! Which trained weights a model file holds: the identity that what was fitted on one model
//! (the answerability probe, a refusal rule) is matched by, so that another model of the
//! same shape (a fine-tune, another quantization, another family with the same widths)
//! never gets it.
//!
//! The identity is a SHA-256 over the GGUF header (every metadata value: tokenizer, chat
//! template, hyper-parameters, quantization; every tensor's name, shape, type and offset)
//! and the bytes of every RMSNorm weight (the output norm and each block's norms: trained
//! values, a few hundred KB even for an 8B). Not the whole file's SHA-256: that reads the
//! whole model again at every load, seconds for a 1.1 GB file natively and many more in a
//! page, which already reads it once as it loads. Two files with the same header and the
//! same norms but other matrices would share an identity; no converter or fine-tune makes
//! such a pair (training moves the norms, and quantizing differently changes the header's
//! types and offsets).

use sha2::{Digest, Sha256};

use crate::gguf::GgufFile;
use crate::source::ByteSource;
use crate::Error;

/// A model file's identity (see the module docs).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ModelIdentity([u8; 32]);

impl ModelIdentity {
    /// The identity of the GGUF model `g`, whose bytes `src` holds.
    pub fn of_gguf(g: &GgufFile, src: &dyn ByteSource) -> Result<Self, Error> {
        let mut hash = Sha256::new();
        let mut header = vec![0u8; usize::try_from(g.data_offset).map_err(|_| Error::BadParam { key: "GGUF data offset".into() })?];
        src.read_at(0, &mut header)?;
        hash.update(&header);
        for t in g.tensors.iter().filter(|t| is_norm(&t.name)) {
            hash.update(g.tensor_bytes(src, t)?);
        }
        Ok(ModelIdentity(hash.finalize().into()))
    }

    /// The identity [`ModelIdentity::to_hex`] wrote, if `hex` is 64 hexadecimal digits.
    pub fn from_hex(hex: &str) -> Option<Self> {
        let mut out = [0u8; 32];
        if hex.len() != 64 {
            return None;
        }
        for (i, b) in out.iter_mut().enumerate() {
            *b = u8::from_str_radix(hex.get(2 * i..2 * i + 2)?, 16).ok()?;
        }
        Some(ModelIdentity(out))
    }

    /// Lower-case hexadecimal, as a probe names its model.
    pub fn to_hex(&self) -> String {
        self.0.iter().map(|b| format!("{b:02x}")).collect()
    }
}

/// Whether a tensor is an RMSNorm weight (`output_norm.weight`, `blk.N.attn_norm.weight`,
/// `blk.N.ffn_norm.weight`, and the per-head `attn_q_norm`/`attn_k_norm`).
fn is_norm(name: &str) -> bool {
    name.ends_with("_norm.weight")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::source::MemorySource;
    use crate::synthetic::{decoder_gguf, DecoderSpec};

    fn identity(spec: &str, seed: u64) -> ModelIdentity {
        let spec: DecoderSpec = spec.parse().unwrap();
        let src = MemorySource::new(decoder_gguf(spec.shape, spec.quant, seed));
        ModelIdentity::of_gguf(&GgufFile::read(&src).unwrap(), &src).unwrap()
    }

    #[test]
    fn the_same_file_has_one_identity_and_other_weights_or_formats_another() {
        let a = identity("qwen2-tiny:q4_k_m", 1);
        assert_eq!(a, identity("qwen2-tiny:q4_k_m", 1));
        assert_ne!(a, identity("qwen2-tiny:q4_k_m", 2), "other weights of the same shapes and header");
        assert_ne!(a, identity("qwen2-tiny:q8_0", 1), "another quantization");
        assert_eq!(a.to_hex().len(), 64);
        assert!(a.to_hex().chars().all(|c| c.is_ascii_hexdigit() && !c.is_ascii_uppercase()));
        assert_eq!(ModelIdentity::from_hex(&a.to_hex()), Some(a));
        assert_eq!(ModelIdentity::from_hex("a5"), None);
        assert_eq!(ModelIdentity::from_hex(&"g".repeat(64)), None);
    }
}
