#!/usr/bin/env python3
"""Replay an answerability probe on questions it was not fitted on, against the probe the
answers were recorded with, and say which questions each would refuse.

Inputs: a probe as the runtime reads it (`crates/runtime/probes/*.json`, or one written by
`fit-answerability-probe.py --write`; it reads the prompt's last token, or the question's
when its `position` says "question"), the `--states` records of the questions (`docmem
eval answers --states`), and the answer records of the same questions asked with the check
off (`docmem eval answers --no-check --out`), whose `refused` is the model's own refusal and
whose `evidence.probe` is the reading of the probe in use when they were asked (its log-odds
less its threshold). The rule replayed is the runtime's: refuse when the probe reads below
its threshold, the model's own refusals on top. Questions without states are left out and
counted; only the records of `--methods ours` are read, each question once. Records of a
run with the check on would be wrong here: their `refused` already holds the probe's own
refusals.

    python3 scripts/eval/replay-probe.py PROBE.json STATES.jsonl [MORE-STATES.jsonl ...] RECORDS.jsonl

Needs numpy (the bench venv has it).
"""
import importlib.util
import json
import pathlib
import sys

import numpy as np

# The area under the ROC curve as the fitting script computes it (its file name has hyphens,
# so it is loaded by path).
_fit = importlib.util.spec_from_file_location("fit_probe", pathlib.Path(__file__).with_name("fit-answerability-probe.py"))
fit_probe = importlib.util.module_from_spec(_fit)
_fit.loader.exec_module(fit_probe)
auc = fit_probe.auc


def main():
    if len(sys.argv) < 4:
        sys.exit(__doc__)
    probe = json.load(open(sys.argv[1]))
    records, seen = [], set()
    for line in open(sys.argv[-1]):
        r = json.loads(line)
        if r.get("method", "ours") == "ours" and r["id"] not in seen:
            seen.add(r["id"])
            records.append(r)
    # The token the probe reads: the prompt's last (`states`) or the question's last.
    key = {"prompt": "states", "question": "question_states"}[probe.get("position", "prompt")]
    states = {}
    for path in sys.argv[2:-1]:
        for line in open(path):
            r = json.loads(line)
            fit_probe.refuse_question_alone(path, r)
            if probe["layer"] not in r["layers"] or key not in r:
                sys.exit(f"{path}: no {key} of layer {probe['layer']} (it records {r['layers']})")
            states.setdefault(r["id"], r[key][r["layers"].index(probe["layer"])])
    kept = [r for r in records if r["id"] in states]
    if any(r.get("evidence", {}).get("probe") is None for r in kept):
        sys.exit(f"{sys.argv[-1]}: records without the probe's reading (evidence.probe)")
    y = np.array([r["answerable"] for r in kept], dtype=bool)
    own = np.array([r["refused"] for r in kept], dtype=bool)
    recorded = np.array([r["evidence"]["probe"] for r in kept])
    w = np.array(probe["weights"])
    replayed = np.array([w @ np.array(states[r["id"]]) + probe["bias"] - probe["threshold"] for r in kept])
    print(f"{len(kept)} questions ({y.sum()} answerable, {(~y).sum()} unanswerable); {len(records) - len(kept)} without states left out")
    print(f"the model's own refusals: {100 * own[y].mean():.0f}% of answerable, {100 * own[~y].mean():.0f}% of unanswerable")
    print("| probe | AUC | answerable refused | unanswerable refused |")
    print("| --- | --- | --- | --- |")
    for name, margin in (("recorded while answering (the probe in use then)", recorded), (f"{sys.argv[1]}, replayed from the states", replayed)):
        refused = own | (margin < 0)
        print(f"| {name} | {auc(margin, y):.3f} | {100 * refused[y].mean():.0f}% | {100 * refused[~y].mean():.0f}% |")


if __name__ == "__main__":
    main()
