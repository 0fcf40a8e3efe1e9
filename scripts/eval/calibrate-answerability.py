#!/usr/bin/env python3
"""Fit the answerability rule (crates/core/src/answerability.rs) on a dev run.

Input: the JSON lines of `docmem eval answers --methods ours --split dev --no-check --out F`
(every answer as the model wrote it, with its evidence). A question is labelled 1 when
SQuAD says it is answerable and 0 when it is not (`is_impossible`). A logistic model over
the five features (the refusal's log-probability, the answer's mean token log-probability,
the answer's support in the passages, the best retrieval similarity, the model's Yes against
No when asked whether the passages state its answer) is fitted by gradient
descent with a small L2 penalty and each weight held to the sign its feature's meaning
gives it (pure Python: the data is a few hundred rows), then the
threshold is chosen: the highest one at which the rule itself refuses at most 5% of the
answerable questions (the model's own refusals come on top: with the answer prompt the
1.5B already refuses about one answerable question in eight by itself, so a budget over
all refusals would leave the rule nothing). Prints the constants to paste into `LOCAL`
and the dev figures.

    python3 scripts/eval/calibrate-answerability.py dev.jsonl [--max-rule-refused 0.05]
"""
import json
import math
import sys


def features(e, with_probabilities=True):
    refusal = min(max(e["refusal_logprob"] if e["refusal_logprob"] is not None else 0.0, -30.0), 0.0)
    answer = min(max(e["answer_logprob"] if e["answer_logprob"] is not None else 0.0, -10.0), 0.0)
    retrieval = min(max(e["retrieval"] if e["retrieval"] is not None else 0.0, -1.0), 1.0)
    support = min(max(e["support"], 0.0), 1.0)
    verification = e.get("verification")
    verification = min(max(verification if verification is not None else 0.0, -20.0), 20.0)
    if not with_probabilities:
        refusal, answer, verification = 0.0, 0.0, 0.0
    return [refusal, answer, support, retrieval, verification]


# The sign each weight must have, by what its feature means: a likelier refusal, less
# grounded; a surer answer, better supported words, a closer retrieval and the model's own
# "Yes, the passages state it", more grounded.
# The fit is projected onto these signs after every step, so a few hundred noisy points
# cannot teach the rule that a model sure of its refusal has found the answer.
SIGNS = [-1, 1, 1, 1, 1]


def fit(xs, ys, l2=0.01, steps=20000, rate=0.05):
    w = [0.0] * (len(xs[0]) + 1)
    n = len(xs)
    for _ in range(steps):
        grad = [0.0] * len(w)
        for x, y in zip(xs, ys):
            z = w[0] + sum(wi * xi for wi, xi in zip(w[1:], x))
            p = 1.0 / (1.0 + math.exp(-z))
            d = p - y
            grad[0] += d / n
            for i, xi in enumerate(x):
                grad[i + 1] += d * xi / n + l2 * w[i + 1] / n
        w = [wi - rate * gi for wi, gi in zip(w, grad)]
        w = [w[0]] + [max(0.0, wi * sign) * sign for wi, sign in zip(w[1:], SIGNS)]
    return w


def prob(w, x):
    return 1.0 / (1.0 + math.exp(-(w[0] + sum(wi * xi for wi, xi in zip(w[1:], x)))))


def main():
    path = sys.argv[1]
    limit = 0.05
    if "--max-rule-refused" in sys.argv:
        limit = float(sys.argv[sys.argv.index("--max-rule-refused") + 1])
    rows = [json.loads(l) for l in open(path) if l.strip()]
    rows = [r for r in rows if r["method"] == "ours" and r["evidence"] is not None]
    for with_p, name in [(True, "LOCAL")]:
        # Answers the model refused by itself stay refused; the rule judges the others.
        judged = [r for r in rows if not r["refused"]]
        xs = [features(r["evidence"], with_p) for r in judged]
        ys = [1.0 if r["answerable"] else 0.0 for r in judged]
        w = fit(xs, ys)
        ps = [prob(w, x) for x in xs]
        ans = [r for r in rows if r["answerable"]]
        un = [r for r in rows if not r["answerable"]]
        self_refused = sum(1 for r in ans if r["refused"])
        best = 0.0
        for t in sorted(set([0.0] + ps)):
            refused = sum(1 for r, p in zip(judged, ps) if r["answerable"] and p < t)
            if refused <= limit * len(ans):
                best = max(best, t)
        # `best` is a data point's probability; refusing below it spares that point.
        threshold = best
        ans_refused = self_refused + sum(1 for r, p in zip(judged, ps) if r["answerable"] and p < threshold)
        un_refused = sum(1 for r in un if r["refused"]) + sum(1 for r, p in zip(judged, ps) if not r["answerable"] and p < threshold)
        print(
            f"pub const {name}: Calibration = Calibration {{ bias: {w[0]:.3f}, refusal: {w[1]:.3f}, answer: {w[2]:.3f}, "
            f"support: {w[3]:.3f}, retrieval: {w[4]:.3f}, verification: {w[5]:.3f}, threshold: {threshold:.3f} }};"
        )
        print(
            f"  dev: answerable refused {ans_refused}/{len(ans)} ({100 * ans_refused / max(len(ans), 1):.0f}%), "
            f"unanswerable refused {un_refused}/{len(un)} ({100 * un_refused / max(len(un), 1):.0f}%)"
        )


if __name__ == "__main__":
    main()
