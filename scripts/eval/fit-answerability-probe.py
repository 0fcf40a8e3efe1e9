#!/usr/bin/env python3
"""Fit a linear probe of the answerer's hidden state that says whether the passages in its
prompt answer the question (SQuAD v2's `is_impossible` as the label), and measure it.

Input: the JSON lines of `docmem eval answers --split dev --states F` (the residual stream
after each of `--state-layers` at the answer prompt's last token and at its question's
last token, which the runtime's probe now reads: `--position question`). For each layer, a
logistic regression with an L2 penalty over the standardized state is fitted and scored by
5-fold cross-validation on those questions: the area under the ROC curve, and the share of
unanswerable questions the probe refuses when its threshold lets it refuse at most 10% of
the answerable ones. Needs numpy (the bench venv has it).

    python3 scripts/eval/fit-answerability-probe.py dev-states.jsonl [more-states.jsonl ...] [--l2 10]
        [--position last|question] [--exclude RECORDS.jsonl] [--groups SQUAD.json] [--curve]
        [--rules LAYER] [--explore] [--write LAYER OUT.json]

Several states files are read as one (a question recorded twice counts once).
`--exclude` leaves out the questions of another run's records (JSON lines with an `id`):
questions kept apart to measure the rule on, which the probe must not be fitted on.
`--rules LAYER` compares decisions built on that layer's probe (cross-validated scores), in
runs that recorded the model's lean towards its refusal (`refusal_opening`: the log-
probability of the refusal's first token only, after the prompt, and whether that token is
the greedy one; `evidence.refusal_logprob` in answer records is the whole refusal's). The
greedy opening stands in for the model's own refusal, which it nearly always begins. Five
rules: the probe with the model's own refusals on top (the rule in use); the probe alone,
overruling them; the opening log-probability alone; and a logistic rule over the probe and
that log-probability, with and without the model's refusals on top. (That rule is fitted on
the probe's out-of-fold scores without a nested split, a mild leak for two features.)
`--groups SQUAD.json` (the data the states were recorded on) keeps each paragraph's
questions in one fold, so that a question's twin written from the same paragraph is never
on the other side of the split (random folds otherwise).
`--curve` says whether more questions would help: for each layer, the held-out AUC of
probes fitted on growing shares of the training folds, each scored on the same held-out
fold.

`--position question` reads the states at the question's last token (runs that recorded
`question_states`); `--explore` also scores both tokens side by side and runs of three
layers, averaged and side by side.

`--write` fits the chosen layer on every question and writes what the runtime reads
(crates/runtime/probes/): {layer, position, weights, bias, threshold, questions, l2}
(`position`: "prompt" for the prompt's last token, "question" for the question's), the
standardization folded into the weights (log-odds = bias + weights · state) and the
threshold (in log-odds) taken from the cross-validated scores at `--max-refused` of the
answerable questions refused (default 0.07: the model's own refusals come on top).
"""
import json
import sys

import numpy as np


def states(rows, position="last"):
    """The states per layer at `position` of the records `rows` ([`load_rows`]): "last" (the
    prompt's last token: `states`) or "question" (the question's last token:
    `question_states`, in runs that have them). Every record must have the same layers."""
    layers = rows[0]["layers"]
    if any(r["layers"] != layers for r in rows):
        sys.exit("the states files record different layers")
    key = {"last": "states", "question": "question_states"}[position]
    if any(key not in r for r in rows):
        sys.exit(f"no {key} (a --states run before the question's token was recorded)")
    y = np.array([1.0 if r["answerable"] else 0.0 for r in rows])
    x = {l: np.array([r[key][i] for r in rows], dtype=np.float64) for i, l in enumerate(layers)}
    return layers, x, y


def refuse_question_alone(path, record):
    """Stop on a record of a question read without its passages (`--question-alone`): a
    probe reads a prompt with them."""
    if record.get("question_alone"):
        sys.exit(f"{path}: states of questions without their passages (--question-alone); a probe reads a prompt with them")


def load_rows(paths, exclude=frozenset()):
    """The records of `paths` in order, each question once, those in `exclude` left out;
    and how many questions were left out."""
    rows, seen, left_out = [], set(), set()
    for path in paths:
        for line in open(path):
            r = json.loads(line)
            refuse_question_alone(path, r)
            if r["id"] in exclude:
                left_out.add(r["id"])
                continue
            if r["id"] in seen:
                continue
            seen.add(r["id"])
            rows.append(r)
    return rows, len(left_out)


def fit(x, y, l2, iters=300):
    """Logistic regression by Newton's method on standardized x; returns (mean, scale, w, b).
    With more dimensions than questions (one layer of the 1.5B already has 1,536 for a few
    hundred questions), each step is solved in the questions' space (the Woodbury
    identity), where a d × d solve of states side by side would take minutes; the intercept
    then carries a tiny penalty (1e-3) to keep that form finite, which moves a written
    probe's numbers only in their last digits."""
    mean, scale = x.mean(0), x.std(0) + 1e-6
    z = (x - mean) / scale
    n, d = z.shape
    a = np.hstack([z, np.ones((n, 1))])
    w = np.zeros(d + 1)
    reg = np.full(d + 1, l2, dtype=np.float64)
    # The intercept all but unpenalized (a tiny penalty keeps the Woodbury form finite).
    reg[-1] = 1e-3 if d + 1 > n else 0.0
    for _ in range(iters):
        p = 1 / (1 + np.exp(-(a @ w)))
        g = a.T @ (p - y) + reg * w
        s = np.maximum(p * (1 - p), 1e-12)
        if d + 1 > n:
            # (diag(reg) + aᵀ S a)⁻¹ g = D⁻¹g − D⁻¹aᵀ (S⁻¹ + a D⁻¹ aᵀ)⁻¹ a D⁻¹g
            dinv_g = g / reg
            m = np.diag(1 / s) + (a / reg) @ a.T
            step = dinv_g - (a.T @ np.linalg.solve(m, a @ dinv_g)) / reg
        else:
            h = (a * s[:, None]).T @ a + np.diag(reg) + 1e-9 * np.eye(d + 1)
            step = np.linalg.solve(h, g)
        w -= step
        if np.abs(step).max() < 1e-8:
            break
    return mean, scale, w[:-1], w[-1]


def score(model, x):
    mean, scale, w, b = model
    return ((x - mean) / scale) @ w + b


def auc(s, y):
    order = np.argsort(s)
    ranks = np.empty(len(s))
    ranks[order] = np.arange(1, len(s) + 1)
    pos = y == 1
    return (ranks[pos].sum() - pos.sum() * (pos.sum() + 1) / 2) / (pos.sum() * (~pos).sum())


def threshold_at(s, y, max_answerable_refused=0.10):
    """The highest threshold refusing at most that share of the answerable (score < t refuses)."""
    answerable = np.sort(s[y == 1])
    k = int(np.floor(max_answerable_refused * len(answerable)))
    return answerable[k] if k < len(answerable) else answerable[-1]


def cross_validate(x, y, l2, folds=5, seed=7, groups=None):
    """Out-of-fold scores of probes fitted on the other folds. With `groups` (one label per
    question, e.g. its SQuAD paragraph), every group falls in one fold: SQuAD v2 asks
    several questions of a paragraph, an unanswerable one often written from an answerable
    one, and random folds put such twins on both sides of a split."""
    s = np.empty(len(y))
    for test in fold_indices(len(y), folds, seed, groups):
        train = np.setdiff1d(np.arange(len(y)), test)
        s[test] = score(fit(x[train], y[train], l2), x[test])
    return s


def fold_indices(n, folds=5, seed=7, groups=None):
    """The questions of each fold: a random permutation dealt round, or with `groups`, the
    groups shuffled and dealt round, each group's questions together."""
    rng = np.random.default_rng(seed)
    if groups is None:
        idx = rng.permutation(n)
        return [np.sort(idx[f::folds]) for f in range(folds)]
    groups = np.asarray(groups)
    names = rng.permutation(np.unique(groups))
    return [np.flatnonzero(np.isin(groups, names[f::folds])) for f in range(folds)]


def paragraph_groups(rows, data_path):
    """Each record's SQuAD paragraph ("article/paragraph"), read from the data file."""
    where = {}
    for a, article in enumerate(json.load(open(data_path))["data"]):
        for p, paragraph in enumerate(article["paragraphs"]):
            for qa in paragraph["qas"]:
                where[qa["id"]] = f"{a}/{p}"
    missing = [r["id"] for r in rows if r["id"] not in where]
    if missing:
        sys.exit(f"{data_path}: no question {missing[0]} (and {len(missing) - 1} more): the states come from other data")
    return [where[r["id"]] for r in rows]


def report(name, x, y, l2, groups=None):
    s = cross_validate(x, y, l2, groups=groups)
    t = threshold_at(s, y)
    refused_u = float((s[y == 0] < t).mean())
    refused_a = float((s[y == 1] < t).mean())
    print(f"| {name} | {auc(s, y):.3f} | {100 * refused_u:.0f}% (answerable {100 * refused_a:.0f}%) |")


def learning_curve(name, x, y, l2, folds=5, seed=7, groups=None):
    """Held-out AUC of probes fitted on 25%, 50%, 75% and all of each training fold, every
    probe of a fold scored on that fold's held-out questions: a curve still rising at 100%
    says more questions would give a better probe."""
    rng = np.random.default_rng(seed)
    if groups is None:
        # The draw `fold_indices` deals random folds from, so that the shares below are
        # drawn as they were before folds could be grouped (the same figures as then).
        rng.permutation(len(y))
    shares = (0.25, 0.5, 0.75, 1.0)
    scores = {f: np.empty(len(y)) for f in shares}
    for test in fold_indices(len(y), folds, seed, groups):
        train = rng.permutation(np.setdiff1d(np.arange(len(y)), test))
        for f in shares:
            part = train[: int(round(f * len(train)))]
            scores[f][test] = score(fit(x[part], y[part], l2), x[test])
    n_train = len(y) * (folds - 1) // folds
    cells = []
    for f in shares:
        s = scores[f]
        t = threshold_at(s, y)
        cells.append(f"{auc(s, y):.3f} / {100 * (s[y == 0] < t).mean():.0f}%")
    print(f"| {name} | " + " | ".join(cells) + f" |  (training questions: {', '.join(str(int(round(f * n_train))) for f in shares)})")


def best_unanswerable_refused(score, own, y, budget):
    """The largest share of unanswerable questions refused by "score below a threshold, or
    the model's own refusal" (`own`: a boolean per question, all False to overrule the
    model) over thresholds that refuse at most `budget` of the answerable ones; None when
    the model's own refusals alone refuse more."""
    best = None
    for t in np.concatenate([np.unique(score), [-np.inf]]):
        refused = (score < t) | own
        if refused[y == 1].mean() <= budget + 1e-9:
            best = max(best or 0.0, refused[y == 0].mean())
    return best


def rules(rows, x, y, l2, budgets=(0.10, 0.15, 0.20), groups=None):
    """Refusal rules built on the cross-validated scores of a probe of the states `x`,
    compared at each budget of answerable questions refused (see the module doc, `--rules`).
    "—" where the model's own refusals alone exceed the budget."""
    if any(r.get("refusal_opening") is None for r in rows):
        sys.exit("--rules: the records lack refusal_opening (a --states run before it was recorded)")
    own = np.array([r["refusal_opening"]["greedy"] for r in rows])
    opening = np.array([r["refusal_opening"]["logprob"] for r in rows])
    probe = cross_validate(x, y, l2, groups=groups)
    combined = cross_validate(np.column_stack([probe, opening]), y, 1.0, groups=groups)
    none = np.zeros(len(y), dtype=bool)
    print(f"the model's own refusals (greedy opening): {100 * own[y == 1].mean():.0f}% of answerable, {100 * own[y == 0].mean():.0f}% of unanswerable")
    print("| rule | " + " | ".join(f"unanswerable refused at <= {100 * b:.0f}% answerable" for b in budgets) + " |")
    print("| --- |" + " --- |" * len(budgets))
    for name, score, on_top in (
        ("the probe, the model's refusals on top (in use)", probe, own),
        ("the probe alone, the model's refusals overruled", probe, none),
        ("the refusal's opening log-probability alone (refusing above a threshold)", -opening, none),
        ("the probe and that log-probability, the model's refusals on top", combined, own),
        ("the probe and that log-probability, overruling the model", combined, none),
    ):
        bests = [best_unanswerable_refused(score, on_top, y, b) for b in budgets]
        cells = ["—" if b is None else f"{100 * b:.0f}%" for b in bests]
        print(f"| {name} | " + " | ".join(cells) + " |")


def main():
    args = sys.argv[1:]
    paths = []
    for a in args:
        if a.startswith("--"):
            break
        paths.append(a)
    if not paths:
        sys.exit(__doc__)
    l2 = float(args[args.index("--l2") + 1]) if "--l2" in args else 10.0
    position = args[args.index("--position") + 1] if "--position" in args else "last"
    exclude = set()
    if "--exclude" in args:
        exclude = {json.loads(line)["id"] for line in open(args[args.index("--exclude") + 1])}
    rows, removed = load_rows(paths, frozenset(exclude))
    layers, x, y = states(rows, position)
    groups = paragraph_groups(rows, args[args.index("--groups") + 1]) if "--groups" in args else None
    if exclude:
        print(f"left out: {removed} questions that {args[args.index('--exclude') + 1]} holds")
    print(f"{len(y)} questions: {int(y.sum())} answerable, {int((1 - y).sum())} unanswerable; L2 {l2}; states at the {position} token")
    folds = "5 folds by paragraph" if groups else "5 random folds"
    print(f"| layer | AUC ({folds}) | unanswerable refused at <= 10% answerable refused |")
    print("| --- | --- | --- |")
    for l in layers:
        report(str(l), x[l], y, l2, groups)
    if "--curve" in args:
        print("| layer | AUC / unanswerable refused at <= 10%, fitted on 25% | 50% | 75% | 100% of the training folds |")
        print("| --- | --- | --- | --- | --- |")
        for l in layers:
            learning_curve(str(l), x[l], y, l2, groups=groups)
    if "--rules" in args:
        layer = int(args[args.index("--rules") + 1])
        if layer not in x:
            sys.exit(f"--rules {layer}: the states record layers {layers}")
        rules(rows, x[layer], y, l2, groups=groups)
    if "--explore" in args:
        # Readings the runtime does not take (yet): both tokens at once, and the states of
        # a run of layers averaged or side by side.
        if position == "last" and all("question_states" in r for r in rows):
            _, xq, _ = states(rows, "question")
            for l in layers:
                report(f"{l}, question and last token side by side", np.hstack([xq[l], x[l]]), y, l2, groups)
        for lo in range(len(layers) - 2):
            run = layers[lo : lo + 3]
            report(f"{run[0]}-{run[-1]} averaged", np.mean([x[l] for l in run], axis=0), y, l2, groups)
            report(f"{run[0]}-{run[-1]} side by side", np.hstack([x[l] for l in run]), y, l2, groups)
    if "--write" in args:
        i = args.index("--write")
        layer, out = int(args[i + 1]), args[i + 2]
        budget = float(args[args.index("--max-refused") + 1]) if "--max-refused" in args else 0.07
        # The threshold from held-out scores (the fit's own scores are over-confident).
        held_out = cross_validate(x[layer], y, l2, groups=groups)
        threshold = float(threshold_at(held_out, y, budget))
        mean, scale, w, b = fit(x[layer], y, l2)
        folded = w / scale
        json.dump(
            {
                "layer": layer,
                "position": {"last": "prompt", "question": "question"}[position],
                "weights": [float("%.7g" % v) for v in folded],
                "bias": float(b - (folded * mean).sum()),
                "threshold": threshold,
                "questions": int(len(y)),
                "l2": l2,
            },
            open(out, "w"),
        )
        print(f"wrote {out}: layer {layer} at the {position} token, threshold {threshold:.3f} (cross-validated: {100 * (held_out[y == 0] < threshold).mean():.0f}% of unanswerable refused, {100 * (held_out[y == 1] < threshold).mean():.0f}% of answerable)")


if __name__ == "__main__":
    main()
