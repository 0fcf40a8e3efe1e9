#!/usr/bin/env python3
"""Does the question's state without the passages sharpen the answerability probe?

The probe reads the answerer's state at the question's last token, after the passages. Part
of that state is the question itself (its kind, its words), which says little about
whether these passages answer it: SQuAD v2's unanswerable questions are written to look like
answerable ones. The question alone, in the answer prompt's wording with no passages (a
short prefill), gives that part by itself; a probe of the difference, or of both states
side by side, may read the evidence's share more cleanly.

Inputs: `--states` runs of the prompts with their passages (`docmem eval answers --states`)
and of the questions alone (the same with `--question-alone`), joined by question. Each
reading is a logistic probe (the fit script's) of one layer's state at the question's last
token, fitted and scored out of fold (5 folds by SQuAD paragraph, `--groups`) on the
training runs: its AUC, and the runtime's rule (refuse below a threshold, the model's own
refusals on top, its greedy opening standing in for them) at the best threshold for each
budget of answerable questions refused. With `--held-out`, each is also fitted on all the
training questions and scored on the held-out runs, with the threshold that refuses 7% of
the training's answerable questions out of fold (as the probe in use was set). The model's
own refusals there come from `--records`, the answer records of those questions asked with
the check off (`docmem eval answers --no-check --out`, whose `refused` is the model's own),
else from the held-out runs' greedy opening, which agrees with the written answer on most
questions but not all.

`--others` adds rows, under the last of `--layers`, for the prompt with its passages read
other ways: the mean and the side by side of every `--layers` layer, and that layer with
penalties of 300 and 1,000.

    python3 scripts/eval/question-alone-probe.py --train WITH.jsonl [...] --alone ALONE.jsonl [...]
        --groups SQUAD.json [--held-out WITH.jsonl [...] [--records NO-CHECK.jsonl]]
        [--layers 15,16] [--l2 100] [--others]

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
BUDGETS = (0.10, 0.15, 0.20)


def option(args, name):
    """The values after `name` up to the next option."""
    if name not in args:
        return []
    rest = args[args.index(name) + 1 :]
    return rest[: next((i for i, a in enumerate(rest) if a.startswith("--")), len(rest))]


def records(paths, alone, exclude=frozenset()):
    """id -> record, each question once; every record must be of the kind asked for (the
    question alone, or the prompt with its passages)."""
    out = {}
    for path in paths:
        for line in open(path):
            r = json.loads(line)
            if bool(r.get("question_alone")) != alone:
                sys.exit(f"{path}: {'not ' if alone else ''}a --question-alone run, given where one {'is' if alone else 'is not'} expected")
            if r["id"] not in exclude:
                out.setdefault(r["id"], r)
    return out


def at(r, layer, path_hint):
    if layer not in r["layers"]:
        sys.exit(f"{path_hint}: no layer {layer} (it records {r['layers']})")
    return r["question_states"][r["layers"].index(layer)]


def readings(ids, with_passages, alone, layer, layers, others):
    """(name, penalty or None for `--l2`'s, states) of each reading, in the table's order."""
    ctx = np.array([at(with_passages[i], layer, "--train/--held-out") for i in ids], dtype=np.float64)
    bare = np.array([at(alone[i], layer, "--alone") for i in ids], dtype=np.float64)
    out = [
        ("with the passages (the reading in use)", None, ctx),
        ("the question alone", None, bare),
        ("with the passages less alone", None, ctx - bare),
        ("both side by side", None, np.hstack([ctx, bare])),
    ]
    if others and layer == layers[-1]:
        every = [np.array([at(with_passages[i], l, "--train/--held-out") for i in ids], dtype=np.float64) for l in layers]
        span = f"{layers[0]}–{layers[-1]}"
        out.append((f"with the passages, the mean of layers {span}", None, sum(every) / len(every)))
        out.append((f"with the passages, layers {span} side by side (penalty 100 a layer)", 100.0 * len(layers), np.hstack(every)))
        out.extend((f"with the passages, penalty {l2:.0f}", l2, ctx) for l2 in (300.0, 1000.0))
    return out


def main():
    args = sys.argv[1:]
    train_paths, alone_paths, held_paths = option(args, "--train"), option(args, "--alone"), option(args, "--held-out")
    if not train_paths or not alone_paths or not option(args, "--groups"):
        sys.exit(__doc__)
    data = option(args, "--groups")[0]
    l2_default = float(option(args, "--l2")[0]) if option(args, "--l2") else 100.0
    try:
        layers = [int(l) for l in option(args, "--layers")[0].split(",")] if option(args, "--layers") else [15, 16]
    except ValueError:
        sys.exit("--layers takes layers separated by commas, e.g. 15,16")
    others = "--others" in args
    held = records(held_paths, alone=False)
    train = records(train_paths, alone=False, exclude=frozenset(held))
    alone = records(alone_paths, alone=True)
    written = {}
    for path in option(args, "--records"):
        for line in open(path):
            r = json.loads(line)
            if r.get("method", "ours") == "ours":
                written.setdefault(r["id"], r["refused"])
    ids = [i for i in train if i in alone]
    hids = [i for i in held if i in alone and (not written or i in written)]
    y = np.array([train[i]["answerable"] for i in ids], dtype=float)
    own = np.array([bool((train[i].get("refusal_opening") or {}).get("greedy")) for i in ids])
    hy = np.array([held[i]["answerable"] for i in hids], dtype=float)
    hown = np.array([written[i] if written else bool((held[i].get("refusal_opening") or {}).get("greedy")) for i in hids], dtype=bool)
    groups = fit_probe.paragraph_groups([{"id": i} for i in ids], data)
    print(f"{len(ids)} training questions ({int(y.sum())} answerable); {len(train) - len(ids)} without the question alone left out")
    if hids:
        source = "their answers written with the check off" if written else "the greedy opening"
        print(f"{len(hids)} held-out questions; the model's own refusals from {source}: {100 * hown[hy == 1].mean():.0f}% of answerable, {100 * hown[hy == 0].mean():.0f}% of unanswerable")
    for layer in layers:
        print(f"\nlayer {layer} (the question's last token)")
        header = "| reading | AUC out of fold | unanswerable refused at <= 10 / 15 / 20% answerable |"
        if hids:
            header += " held out: AUC | answerable refused | unanswerable refused |"
        print(header)
        print("| --- " * (header.count("|") - 1) + "|")
        held_x = readings(hids, held, alone, layer, layers, others) if hids else None
        for k, (name, l2, x) in enumerate(readings(ids, train, alone, layer, layers, others)):
            l2 = l2 or l2_default
            s = fit_probe.cross_validate(x, y, l2, groups=groups)
            cells = [fit_probe.best_unanswerable_refused(s, own, y, b) for b in BUDGETS]
            row = f"| {name} | {fit_probe.auc(s, y):.3f} | " + " / ".join("—" if c is None else f"{100 * c:.0f}%" for c in cells) + " |"
            if held_x:
                t = fit_probe.threshold_at(s, y, THRESHOLD_SHARE)
                hs = fit_probe.score(fit_probe.fit(x, y, l2), held_x[k][2])
                refused = (hs < t) | hown
                row += f" {fit_probe.auc(hs, hy):.3f} | {100 * refused[hy == 1].mean():.0f}% | {100 * refused[hy == 0].mean():.0f}% |"
            print(row)


if __name__ == "__main__":
    main()
