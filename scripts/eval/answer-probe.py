#!/usr/bin/env python3
"""Does the answerer's state while it writes its answer tell unanswerable questions apart
better than its state before it writes?

The answerability probe reads the prompt before the answer (first at its last token, now
at the question's last): the model has read the passages and the question, but not yet
chosen an answer. Probes of a model's errors are
reported to read better at the answer's own tokens, where the model has committed to a
claim it can compare with the passages. This script measures that on one set of questions,
every reading under the same folds.

Input: the JSON lines of `docmem eval answers --split dev --states F --answer-states`: for
each question the prompt's states (`states`, `question_states`), the greedy answer
(`answer`, `refused` when it is the model's own refusal), and the states at the answer
(`answer_states`: `last`, the last token of what it says before its citations; `mean`, the
mean over those tokens; `end`, the reply's last token).

    python3 scripts/eval/answer-probe.py STATES.jsonl [MORE.jsonl ...] --groups SQUAD.json [--l2 100]
        [--stack LAYER]

Every probe is a logistic regression over one layer's standardized state (the fit script's),
scored out of fold with 5 folds by SQuAD paragraph (`--groups`: the data the states were
recorded on). The model's own refusals need no probe, so the probes of the answer are
fitted and scored on the written answers only; the prompt's probe both ways (on all
questions, as the runtime's probe is fitted, and on the written answers). For each, the table gives the AUC on
the written answers and the rule the runtime applies: refuse below a threshold, the
model's own refusals on top, as the share of unanswerable questions refused when at most
10% / 15% / 20% of the answerable ones are (of all questions). Needs numpy (the bench venv
has it).

`--stack LAYER` also combines that layer's readings: a logistic rule over the out-of-fold
scores of every reading and the refusal's opening log-probability, itself scored out of
fold (fitted on the readings' out-of-fold scores without a nested split: a mild leak for
six features).
"""
import importlib.util
import pathlib
import sys

import numpy as np

# The fit script's probe, folds and rule (its file name has hyphens, so it is loaded by path).
_fit = importlib.util.spec_from_file_location("fit_probe", pathlib.Path(__file__).with_name("fit-answerability-probe.py"))
fit_probe = importlib.util.module_from_spec(_fit)
_fit.loader.exec_module(fit_probe)

BUDGETS = (0.10, 0.15, 0.20)


def readings(rows, layer):
    """One layer's states at each reading, one row per question."""
    i = rows[0]["layers"].index(layer)
    at = {
        "prompt's last token": [r["states"][i] for r in rows],
        "question's last token": [r["question_states"][i] for r in rows],
        "answer's last said token": [r["answer_states"]["last"][i] for r in rows],
        "answer's tokens, mean": [r["answer_states"]["mean"][i] for r in rows],
        "reply's last token": [r["answer_states"]["end"][i] for r in rows],
    }
    return {name: np.array(x, dtype=np.float64) for name, x in at.items()}


def row(name, score, written, own, y):
    """A table row: the AUC on the written answers, and the rule at each budget."""
    bests = [fit_probe.best_unanswerable_refused(score, own, y, b) for b in BUDGETS]
    cells = ["—" if b is None else f"{100 * b:.0f}%" for b in bests]
    print(f"| {name} | {fit_probe.auc(score[written], y[written]):.3f} | " + " | ".join(cells) + " |")


def main():
    args = sys.argv[1:]
    paths = [a for a in args[: next((i for i, a in enumerate(args) if a.startswith("--")), len(args))]]
    if not paths or "--groups" not in args:
        sys.exit(__doc__)
    l2 = float(args[args.index("--l2") + 1]) if "--l2" in args else 100.0
    rows, _ = fit_probe.load_rows(paths)
    if any("answer_states" not in r for r in rows):
        sys.exit("records without answer_states: record them with --states F --answer-states")
    if any(r["layers"] != rows[0]["layers"] for r in rows):
        sys.exit("the states files record different layers")
    groups = np.array(fit_probe.paragraph_groups(rows, args[args.index("--groups") + 1]))
    if "--stack" in args and int(args[args.index("--stack") + 1]) not in rows[0]["layers"]:
        sys.exit(f"--stack: the states record layers {rows[0]['layers']}")
    y = np.array([1.0 if r["answerable"] else 0.0 for r in rows])
    own = np.array([bool(r["refused"]) for r in rows])
    written = ~own
    print(f"{len(rows)} questions ({int(y.sum())} answerable, {int((1 - y).sum())} unanswerable); "
          f"the model's own refusals: {100 * own[y == 1].mean():.0f}% of answerable, {100 * own[y == 0].mean():.0f}% of unanswerable; "
          f"{int(written.sum())} answers written; L2 {l2}; 5 folds by paragraph")
    print("| layer, reading | AUC (written answers) | " + " | ".join(f"unanswerable refused at <= {100 * b:.0f}% answerable" for b in BUDGETS) + " |")
    print("| --- | --- |" + " --- |" * len(BUDGETS))
    for layer in rows[0]["layers"]:
        x = readings(rows, layer)
        on_all = fit_probe.cross_validate(x["prompt's last token"], y, l2, groups=groups)
        row(f"{layer}, prompt's last token, fitted on all questions", on_all, written, own, y)
        scores = {}
        for name, states in x.items():
            score = np.zeros(len(y))
            score[written] = fit_probe.cross_validate(states[written], y[written], l2, groups=groups[written])
            scores[name] = score
            row(f"{layer}, {name}", score, written, own, y)
        both = np.hstack([x["prompt's last token"], x["answer's last said token"]])
        score = np.zeros(len(y))
        score[written] = fit_probe.cross_validate(both[written], y[written], l2, groups=groups[written])
        row(f"{layer}, prompt's and answer's last tokens side by side", score, written, own, y)
        if "--stack" in args and int(args[args.index("--stack") + 1]) == layer:
            if any(r.get("refusal_opening") is None for r in rows):
                sys.exit("--stack: records without refusal_opening")
            opening = np.array([r["refusal_opening"]["logprob"] for r in rows])
            features = np.column_stack([scores[name] for name in x] + [opening])
            stacked = np.zeros(len(y))
            stacked[written] = fit_probe.cross_validate(features[written], y[written], 1.0, groups=groups[written])
            row(f"{layer}, every reading and the refusal's opening, stacked", stacked, written, own, y)


if __name__ == "__main__":
    main()
