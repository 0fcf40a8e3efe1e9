#!/usr/bin/env python3
"""Does the question's state without the passages sharpen the answerability probe?

The probe reads the answerer's state at the question's last token, after the passages. Part
of that state is the question itself (its kind, its words), which says little about
whether these passages answer it: SQuAD v2's unanswerable questions are written to look like
answerable ones. The question alone, in the answer prompt's wording with no passages (a
short prefill), gives that part by itself; a probe of the difference, or of both states
side by side, may read the evidence's share more cleanly.

Inputs: `--states` runs of the prompts with their passages (`docmem eval answers --states`)
and of the questions alone (the same with `--question-alone`), joined by question. Fitted and
scored out of fold (5 folds by SQuAD paragraph, `--groups`) on the training runs; with
`--held-out`, also fitted on all of them and scored on held-out runs, with the runtime's rule
(refuse below the threshold that refuses 7% of the training's answerable questions out of
fold, the model's own refusals on top; the model's refusal is its greedy opening).

    python3 scripts/eval/question-alone-probe.py --train WITH.jsonl [...] --alone ALONE.jsonl [...]
        --groups SQUAD.json [--held-out WITH.jsonl [...]] [--layers 15,16] [--l2 100]

Needs numpy (the bench venv has it).
"""
import importlib.util
import json
import pathlib
import sys

import numpy as np

_fit = importlib.util.spec_from_file_location("fit_probe", pathlib.Path(__file__).with_name("fit-answerability-probe.py"))
fit_probe = importlib.util.module_from_spec(_fit)
_fit.loader.exec_module(fit_probe)

# The share of answerable questions the runtime's threshold refuses (the probe in use).
THRESHOLD_SHARE = 0.07


def option(args, name):
    """The paths after `name` up to the next option."""
    if name not in args:
        return []
    rest = args[args.index(name) + 1 :]
    return rest[: next((i for i, a in enumerate(rest) if a.startswith("--")), len(rest))]


def question_states(paths, layer, exclude=frozenset()):
    """id -> (answerable, own refusal, state at the question's last token of `layer`)."""
    out = {}
    for path in paths:
        for line in open(path):
            r = json.loads(line)
            if r["id"] in exclude or r["id"] in out:
                continue
            if layer not in r["layers"]:
                sys.exit(f"{path}: no layer {layer} (it records {r['layers']})")
            own = bool((r.get("refusal_opening") or {}).get("greedy", False))
            out[r["id"]] = (r["answerable"], own, r["question_states"][r["layers"].index(layer)])
    return out


def readings(ids, with_passages, alone):
    ctx = np.array([with_passages[i][2] for i in ids], dtype=np.float64)
    bare = np.array([alone[i][2] for i in ids], dtype=np.float64)
    return {
        "with the passages (in use)": ctx,
        "alone": bare,
        "with the passages less alone": ctx - bare,
        "both side by side": np.hstack([ctx, bare]),
    }


def main():
    args = sys.argv[1:]
    train_paths, alone_paths, held_paths = option(args, "--train"), option(args, "--alone"), option(args, "--held-out")
    if not train_paths or not alone_paths or "--groups" not in args:
        sys.exit(__doc__)
    data = args[args.index("--groups") + 1]
    l2 = float(args[args.index("--l2") + 1]) if "--l2" in args else 100.0
    layers = [int(l) for l in option(args, "--layers")[0].split(",")] if "--layers" in args else [15, 16]
    held_ids = set()
    for path in held_paths:
        held_ids |= {json.loads(line)["id"] for line in open(path)}
    for layer in layers:
        train = question_states(train_paths, layer, exclude=held_ids)
        alone = question_states(alone_paths, layer)
        ids = [i for i in train if i in alone]
        y = np.array([train[i][0] for i in ids], dtype=float)
        own = np.array([train[i][1] for i in ids])
        groups = fit_probe.paragraph_groups([{"id": i} for i in ids], data)
        print(f"\nlayer {layer}: {len(ids)} training questions ({int(y.sum())} answerable); {len(train) - len(ids)} without the question alone left out")
        held = question_states(held_paths, layer) if held_paths else {}
        hids = [i for i in held if i in alone]
        hy = np.array([held[i][0] for i in hids], dtype=float)
        hown = np.array([held[i][1] for i in hids], dtype=bool)
        header = "| reading | AUC out of fold | unanswerable refused at <= 10 / 15 / 20% answerable |"
        if hids:
            header += f" held out ({len(hids)}): AUC | answerable refused | unanswerable refused |"
        print(header)
        print("| --- " * (header.count("|") - 1) + "|")
        held_x = readings(hids, held, alone) if hids else {}
        for name, x in readings(ids, train, alone).items():
            s = fit_probe.cross_validate(x, y, l2, groups=groups)
            cells = [fit_probe.best_unanswerable_refused(s, own, y, b) for b in (0.10, 0.15, 0.20)]
            row = f"| {name} | {fit_probe.auc(s, y):.3f} | " + " / ".join("—" if c is None else f"{100 * c:.0f}%" for c in cells) + " |"
            if hids:
                t = fit_probe.threshold_at(s, y, THRESHOLD_SHARE)
                hs = fit_probe.score(fit_probe.fit(x, y, l2), held_x[name])
                refused = (hs < t) | hown
                row += f" {fit_probe.auc(hs, hy):.3f} | {100 * refused[hy == 1].mean():.0f}% | {100 * refused[hy == 0].mean():.0f}% |"
            print(row)


if __name__ == "__main__":
    main()
