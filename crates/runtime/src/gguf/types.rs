//! GGML tensor types: the block layouts GGUF files store weights in.

use std::fmt;

/// A tensor element type of GGML, by its GGUF type id.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum GgmlType {
    /// 32-bit float.
    F32,
    /// 16-bit IEEE float.
    F16,
    /// bfloat16.
    BF16,
    /// 4-bit, 32 per block, one f16 scale.
    Q4_0,
    /// 4-bit, 32 per block, f16 scale and minimum.
    Q4_1,
    /// 5-bit, 32 per block, one f16 scale.
    Q5_0,
    /// 5-bit, 32 per block, f16 scale and minimum.
    Q5_1,
    /// 8-bit, 32 per block, one f16 scale.
    Q8_0,
    /// 4-bit k-quant, 256 per super-block.
    Q4K,
    /// 5-bit k-quant, 256 per super-block.
    Q5K,
    /// 6-bit k-quant, 256 per super-block.
    Q6K,
}

impl GgmlType {
    /// Every supported type.
    pub const ALL: [GgmlType; 11] = [
        GgmlType::F32,
        GgmlType::F16,
        GgmlType::BF16,
        GgmlType::Q4_0,
        GgmlType::Q4_1,
        GgmlType::Q5_0,
        GgmlType::Q5_1,
        GgmlType::Q8_0,
        GgmlType::Q4K,
        GgmlType::Q5K,
        GgmlType::Q6K,
    ];

    /// The type for a GGUF type id; `None` for the types docmem does not run.
    pub fn from_id(id: u32) -> Option<Self> {
        GgmlType::ALL.into_iter().find(|t| t.id() == id)
    }

    /// GGUF's id for this type.
    pub fn id(self) -> u32 {
        match self {
            GgmlType::F32 => 0,
            GgmlType::F16 => 1,
            GgmlType::Q4_0 => 2,
            GgmlType::Q4_1 => 3,
            GgmlType::Q5_0 => 6,
            GgmlType::Q5_1 => 7,
            GgmlType::Q8_0 => 8,
            GgmlType::Q4K => 12,
            GgmlType::Q5K => 13,
            GgmlType::Q6K => 14,
            GgmlType::BF16 => 30,
        }
    }

    /// Elements per block.
    pub fn block_elements(self) -> u64 {
        match self {
            GgmlType::F32 | GgmlType::F16 | GgmlType::BF16 => 1,
            GgmlType::Q4_0 | GgmlType::Q4_1 | GgmlType::Q5_0 | GgmlType::Q5_1 | GgmlType::Q8_0 => 32,
            GgmlType::Q4K | GgmlType::Q5K | GgmlType::Q6K => 256,
        }
    }

    /// Bytes per block.
    pub fn block_bytes(self) -> u64 {
        match self {
            GgmlType::F32 => 4,
            GgmlType::F16 | GgmlType::BF16 => 2,
            GgmlType::Q4_0 => 18, // f16 d + 16 bytes of nibbles
            GgmlType::Q4_1 => 20, // f16 d, f16 m + 16
            GgmlType::Q5_0 => 22, // f16 d + 4 bytes of high bits + 16
            GgmlType::Q5_1 => 24, // f16 d, f16 m + 4 + 16
            GgmlType::Q8_0 => 34, // f16 d + 32
            GgmlType::Q4K => 144, // f16 d, f16 dmin, 12 scale bytes, 128 nibbles
            GgmlType::Q5K => 176, // as Q4_K + 32 bytes of high bits
            GgmlType::Q6K => 210, // 128 low nibbles, 64 high 2-bits, 16 scales, f16 d
        }
    }

    /// The name llama.cpp prints.
    pub fn name(self) -> &'static str {
        match self {
            GgmlType::F32 => "F32",
            GgmlType::F16 => "F16",
            GgmlType::BF16 => "BF16",
            GgmlType::Q4_0 => "Q4_0",
            GgmlType::Q4_1 => "Q4_1",
            GgmlType::Q5_0 => "Q5_0",
            GgmlType::Q5_1 => "Q5_1",
            GgmlType::Q8_0 => "Q8_0",
            GgmlType::Q4K => "Q4_K",
            GgmlType::Q5K => "Q5_K",
            GgmlType::Q6K => "Q6_K",
        }
    }
}

impl fmt::Display for GgmlType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// GGML's names for the type ids docmem does not run (for error messages).
pub fn unsupported_type_name(id: u32) -> &'static str {
    match id {
        9 => "Q8_1",
        10 => "Q2_K",
        11 => "Q3_K",
        15 => "Q8_K",
        16..=23 => "an IQ quantization",
        24 => "I8",
        25 => "I16",
        26 => "I32",
        27 => "I64",
        28 => "F64",
        29 => "IQ1_M",
        _ => "an unknown type",
    }
}
