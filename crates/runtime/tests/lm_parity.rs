//! Parity with llama.cpp on SmolLM2-135M Q4_1 (golden file from `scripts/golden/lm.py`):
//! token ids on a mixed corpus, greedy continuations, top-20 log-probabilities, and top-1
//! next-token agreement over a long text (`docmem_runtime::lm::parity`). The same check
//! runs on Qwen2.5-1.5B (the MemReader size class, 1.1 GB) at benchmark time:
//! `docmem bench lm --model qwen2.5-coder-1.5b-instruct-q4_k_m.gguf --golden
//! crates/runtime/tests/golden/lm-qwen2.5-1.5b.json` after `docmem models fetch bench`
//! (`npm test` runs it on every CPU path too: `scripts/kquant-parity.sh`).
//!
//! Every x86 kernel path this CPU can take is checked (`common::on_every_lower_cpu_path`),
//! since a user's CPU may have only AVX2, or no vector extension at all.

mod common;

use common::{manifest_dir, model};

use docmem_runtime::lm::{parity, Lm, LoadOptions};

#[test]
fn smollm2_matches_llama_cpp_on_every_cpu_path() {
    common::on_every_lower_cpu_path("smollm2_matches_llama_cpp", docmem_runtime::cpu::isa::Isa::Portable);
}

#[test]
fn smollm2_matches_llama_cpp() {
    common::assert_cpu_path();
    eprintln!("CPU path: {}", docmem_runtime::cpu::isa::in_use().name());
    let path = manifest_dir().join("tests/golden/lm-smollm2.json");
    let golden = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let lm = Lm::load(&model("SmolLM2-135M-Instruct.Q4_1.gguf"), &LoadOptions::default()).unwrap();
    // The portable path runs about fifteen times slower (software FMA); its kernels are held
    // bit-identical to the SIMD ones by the kernel tests, so the long text's first 256
    // positions, with every greedy continuation, stand for the whole there.
    let portable = docmem_runtime::cpu::isa::in_use() == docmem_runtime::cpu::isa::Isa::Portable;
    let positions = if portable { 256 } else { usize::MAX };
    let report = parity::check_within(&lm, &golden, positions).unwrap();
    for g in &report.greedy {
        eprintln!("{:?}: {}/{} greedy tokens identical", g.prompt, g.identical, g.reference);
    }
    eprintln!("top-1 agreement {}/{}, worst top-20 log-prob difference {:.2e}", report.top1_agree, report.top1_total, report.worst_top20);
    assert_eq!(report.top1_total, 1305.min(positions), "the golden text's positions");
    assert_eq!(report.greedy.len(), 5, "the golden prompts");
    let failures = report.failures();
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
