//! Dequantization against llama.cpp's `gguf` Python package, through golden values written
//! by `scripts/golden/dequant.py` (random blocks of every type, and real SmolLM2 blocks).

mod common;

use common::manifest_dir;
use docmem_runtime::gguf::GgmlType;
use docmem_runtime::quant::dequantize;

fn hex(s: &str) -> Vec<u8> {
    (0..s.len()).step_by(2).map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap()).collect()
}

#[test]
fn every_type_matches_gguf_py() {
    let path = manifest_dir().join("tests/golden/dequant.json");
    let golden: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let cases = golden["cases"].as_array().unwrap();
    let mut types = std::collections::HashSet::new();
    for case in cases {
        let name = case["name"].as_str().unwrap();
        let ty = GgmlType::from_id(case["type_id"].as_u64().unwrap() as u32).unwrap();
        types.insert(ty);
        let mut got = Vec::new();
        dequantize(ty, &hex(case["bytes"].as_str().unwrap()), &mut got).unwrap();
        let want: Vec<f32> = case["values"].as_array().unwrap().iter().map(|v| f32::from_bits(v.as_u64().unwrap() as u32)).collect();
        assert_eq!(got.len(), want.len(), "{name}");
        for (i, (g, w)) in got.iter().zip(&want).enumerate() {
            let tol = 1e-6 * w.abs().max(1e-3);
            assert!((g - w).abs() <= tol, "{name}: element {i}: ours {g}, gguf-py {w}");
        }
    }
    // Every type docmem runs except F32 (a plain copy) is covered.
    assert_eq!(types.len(), GgmlType::ALL.len() - 1, "{types:?}");
}
