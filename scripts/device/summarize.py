"""The GPU run's report: every step's JSON (from scripts/device/gpu-run.sh's work folder)
into one gpu-run.json, and the table a person reads into gpu-run.md.

    summarize.py WORK OUT SPEC PEAK_GBS

Exits 1 when a step failed or a kernel check did not pass, so a smoke run that breaks is
a failed test, not a quiet table of dashes. llama.cpp's step may fail or be skipped (its
build needs a CUDA machine and time): that is reported, not an error.
"""
import json
import os
import sys

work, out, spec, peak = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4]


def load(name):
    try:
        with open(os.path.join(work, name)) as f:
            return json.load(f)
    except (OSError, ValueError) as e:
        return {"failed": f"{name}: {e}"}


def read_csv(name):
    try:
        with open(os.path.join(work, name)) as f:
            rows = [line.strip() for line in f if line.strip()]
        return dict(zip([h.strip() for h in rows[0].split(",")], [v.strip() for v in rows[1].split(",")])) if len(rows) > 1 else {}
    except OSError:
        return {}


run = {
    "model": f"synthetic {spec}",
    "nvidia_smi": read_csv("nvidia-smi.csv"),
    "peak_gbs": float(peak) if peak else None,
    "checks": load("checks.json"),
    "lm_f16": load("lm-f16.json"),
    "lm_f32": load("lm-f32.json"),
    "lm_baseline": load("lm-baseline.json") if os.path.exists(os.path.join(work, "lm-baseline.json")) else None,
    "embed": load("embed.json"),
    "copy": load("copy.json") if os.path.exists(os.path.join(work, "copy.json")) else None,
    "llama_cpp_cuda": load("llamacpp-cuda.json"),
}
checks = run["checks"]
# A step failed when its JSON says so (gpu-run.sh writes {"failed": …} or {"skipped": …});
# the checks' report counts its failures in "failed" and always has "paths".
failures = [k for k in ("lm_f16", "lm_f32", "embed") if "failed" in run[k] or "skipped" in run[k]]
if run["lm_baseline"] and ("failed" in run["lm_baseline"] or "skipped" in run["lm_baseline"]):
    failures.append("lm_baseline")
mp0, dr0 = run["lm_f16"].get("multi_path"), run["lm_f16"].get("drafts")
if mp0 and not mp0.get("identical"):
    failures.append("batched paths gave other tokens than one by one")
if dr0 and not dr0.get("greedy_identical"):
    failures.append("greedy output changed with drafts")
if "paths" not in checks:
    failures.append("checks")
elif checks.get("failed"):
    failures.append(f"{checks['failed']} kernel checks")
with open(os.path.join(out, "gpu-run.json"), "w") as f:
    json.dump(run, f, indent=2)


def num(v, fmt="{:.1f}"):
    return fmt.format(v) if isinstance(v, (int, float)) else "–"


lines = []
adapter = checks.get("adapter") or {}
lines.append(f"GPU run: {adapter.get('name', '?')} ({adapter.get('backend', '?')}, driver {adapter.get('driver', '?')} {adapter.get('driver_info', '')}),"
             f" model {run['model']}")
lines.append("")
lines.append("| kernel checks | passed | failed |")
lines.append("|---|---|---|")
for p in checks.get("paths", []):
    if p.get("skipped"):
        lines.append(f"| {p['path']} path | skipped: {p['skipped']} | |")
    else:
        bad = [c["check"] for c in p["checks"] if not c["passed"]]
        lines.append(f"| {p['path']} path | {len(p['checks']) - len(bad)} | {len(bad)}{': ' + ', '.join(bad) if bad else ''} |")
lines.append("")
llama = run["llama_cpp_cuda"]
pp, tg = run["lm_f16"].get("prompt_tokens", "?"), run["lm_f16"].get("gen_tokens", "?")
lines.append(f"| engine | prefill tok/s ({pp}) | decode tok/s ({tg} at depth {pp}) | decode GB/s of weights | share of peak |")
lines.append("|---|---|---|---|---|")
rows = [("docmem WebGPU, f16 path", run["lm_f16"]), ("docmem WebGPU, f32 path", run["lm_f32"])]
if run["lm_baseline"]:
    rows.append(("docmem WebGPU, f16 path, the earlier build (--baseline)", run["lm_baseline"]))
for label, r in rows:
    d = r.get("docmem", {})
    lines.append(f"| {label} | {num(d.get('prefill_tok_s'))} | {num(d.get('decode_tok_s'))} | {num(r.get('decode_weight_gbs'))} |"
                 f" {num((r.get('bandwidth_share') or 0) * 100, '{:.1f}%') if r.get('bandwidth_share') else '–'} |")
if llama.get("status") == "ok":
    wb = run["lm_f16"].get("weight_bytes_per_token")
    gbs = wb * llama["decode_tok_s"] / 1e9 if wb else None
    share = f"{gbs / float(peak) * 100:.1f}%" if gbs and peak else "–"
    lines.append(f"| llama.cpp CUDA (llama-bench, -fa 0) | {num(llama.get('prefill_tok_s'))} | {num(llama.get('decode_tok_s'))} | {num(gbs)} | {share} |")
    f16 = run["lm_f16"].get("docmem", {})
    if f16.get("decode_tok_s"):
        lines.append(f"| ratio docmem f16 / llama.cpp | {f16['prefill_tok_s'] / llama['prefill_tok_s']:.2f}× | {f16['decode_tok_s'] / llama['decode_tok_s']:.2f}× | | |")
else:
    lines.append(f"| llama.cpp CUDA | {llama.get('status', 'failed')}: {llama.get('skipped') or llama.get('message') or llama.get('failed', '')} | | | |")
lines.append("")
if run["peak_gbs"]:
    copy = (run["copy"] or {}).get("copy_gbs_read_plus_write")
    lines.append(f"Peak bandwidth taken as {run['peak_gbs']:.0f} GB/s (nominal){'; a device-to-device copy moved ' + num(copy, '{:.0f}') + ' GB/s' if copy else ''}."
                 f" Weights read per decoded token: {num((run['lm_f16'].get('weight_bytes_per_token') or 0) / 1e6, '{:.0f}')} MB.")
    lines.append("")
work_rows = [(label, r.get("gpu_work")) for label, r in rows if r.get("gpu_work")]
if work_rows:
    lines.append("| GPU work (counted, not timed) | dispatches a decoded token | a layer | dispatches for the prompt | compute passes a forward |")
    lines.append("|---|---|---|---|---|")
    for label, w in work_rows:
        lines.append(f"| {label} | {w['dispatches_per_decoded_token']:.0f} | {w['dispatches_per_layer']:.2f} | {w['dispatches_per_prompt']} |"
                     f" {w['compute_passes_per_forward']:.2f} |")
    lines.append("")
kern = (run["lm_f16"].get("gpu_kernels") or {}).get("rows", [])
if kern:
    lines.append("| slowest kernels (f16 path) | decode µs/token | share of decode | dispatches/token | prefill µs/token |")
    lines.append("|---|---|---|---|---|")
    for k in sorted(kern, key=lambda k: -k["decode_us_per_token"])[:8]:
        lines.append(f"| {k['kernel']} | {k['decode_us_per_token']:.1f} | {k['decode_share'] * 100:.1f}% | {k['decode_dispatches_per_token']:.0f} | {k['prefill_us_per_token']:.1f} |")
    g = run["lm_f16"]["gpu_kernels"]
    lines.append(f"| GPU time per token (sum) | {g['decode_gpu_us_per_token']:.0f} | | {sum(k['decode_dispatches_per_token'] for k in kern):.0f} | {g['prefill_gpu_us_per_token']:.1f} |")
    lines.append("")
mp, dr = run["lm_f16"].get("multi_path"), run["lm_f16"].get("drafts")
if mp or dr:
    lines.append("| speed-up | with | without | ratio | note |")
    lines.append("|---|---|---|---|---|")
    if mp:
        lines.append(f"| {mp['paths']} paths as one batch (aggregate tok/s) | {mp['batched_tok_s']:.1f} | {mp['sequential_tok_s']:.1f} | {mp['ratio']:.2f}× |"
                     f" {'identical tokens' if mp['identical'] else 'TOKENS DIFFER'} |")
    if dr:
        lines.append(f"| prompt-lookup drafts, {dr['paths']} path(s) (tok/s) | {dr['drafted_tok_s']:.1f} | {dr['plain_tok_s']:.1f} | {dr['ratio']:.2f}× |"
                     f" {dr['accepted']}/{dr['drafted']} drafted accepted; {'greedy identical' if dr['greedy_identical'] else 'GREEDY DIFFERS'} |")
    lines.append("")
emb = run["embed"].get("gpu")
if emb:
    lines.append(f"| embedder ({run['embed'].get('model')}, {run['embed'].get('tokens_per_text')} tokens) | batch 1 sentences/s | batch 32 sentences/s |")
    lines.append("|---|---|---|")
    lines.append(f"| docmem WebGPU f32 | {emb[1]['batch1']:.1f} | {emb[1]['batch32']:.1f} |")
    lines.append("")
if failures:
    lines.append(f"FAILED: {', '.join(failures)}")
with open(os.path.join(out, "gpu-run.md"), "w") as f:
    f.write("\n".join(lines) + "\n")
print("\n".join(lines))
sys.exit(1 if failures else 0)
