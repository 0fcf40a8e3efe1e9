#!/usr/bin/env python3
"""Does lexical coverage of the question add to the answerability probe?

SQuAD v2's unanswerable questions are often written against the paragraph they come from
with one word changed (a name, a date, a negation), so the question's own words missing
from the passages, or from the sentence the answer was taken from, are a classic signal.

This reads the records of a `docmem eval answers --no-check` run on a dev split (every
answer as the model wrote it, with the probe's reading and the passages shown), computes
three such features, prints each one's AUC beside the probe's on the answers the model
wrote (its own refusals stand whatever the rule), then compares rules that refuse those
answers below a threshold: the probe alone (the rule in use refuses below 0), and logistic
rules over the features with and without the probe, fitted leave-one-out. For each rule it
prints the most unanswerable questions refused while at most 10, 15, 20 or 25% of the
answerable ones are (the model's own refusals included).

Needs numpy (the bench venv has it):

    ~/.cache/docmem/bench-venv/bin/python3 scripts/eval/question-coverage.py dev-no-check.jsonl
"""
import json
import re
import sys
from pathlib import Path

import numpy as np

TERMS_RS = Path(__file__).resolve().parents[2] / 'crates/core/src/route/terms.rs'
block = TERMS_RS.read_text().split('const STOPWORDS', 1)[1].split('];', 1)[0]
STOPWORDS = set(re.findall(r'"([^"]+)"', block))


def stems(text):
    """Content words, lower-cased, cut to five characters (names/named, printed/printing)."""
    return {w[:5] for w in re.findall(r'[^\W_]+', text.lower()) if w not in STOPWORDS}


def features(r):
    q = stems(r['question'])
    passages = r.get('passages', [])
    sets = [stems(p) for p in passages]
    best = max((len(q & p) / max(1, len(q)) for p in sets), default=0.0)
    # The sentence sharing most of the answer's words (not the question's), with its
    # neighbours: how much of the question it holds (None when no sentence shares any).
    answer = stems(re.sub(r'\[\d+\]', '', r['written'])) - q
    near, most = None, 0
    for p in passages:
        sentences = [s for s in re.split(r'(?<=[.!?])\s+', p) if s]
        for i, s in enumerate(sentences):
            shared = len(answer & stems(s))
            if shared > most:
                around = set().union(*(stems(x) for x in sentences[max(0, i - 1):i + 2]))
                near, most = len(q & around) / max(1, len(q)), shared
    return {'best passage': best, 'answer sentence': near}


def auc(pos, neg):
    pairs = [(a > b) + 0.5 * (a == b) for a in pos for b in neg]
    return sum(pairs) / len(pairs) if pairs else float('nan')


def fit(x, y, l2=1.0):
    w = np.zeros(x.shape[1])
    penalty = np.diag(np.r_[0.0, np.ones(x.shape[1] - 1)]) * l2
    for _ in range(100):
        p = 1 / (1 + np.exp(-x @ w))
        w -= np.linalg.solve(x.T @ (x * (p * (1 - p))[:, None]) + penalty, x.T @ (p - y) + penalty @ w)
    return w


rows = [json.loads(line) for line in open(sys.argv[1]) if line.strip()]
rows = [r for r in rows if r.get('method') == 'ours']
if any(r.get('grounded') is not None for r in rows):
    sys.exit('these records were judged by the answerability check: run `docmem eval answers --no-check`')
data = [dict(features(r), probe=(r.get('evidence') or {}).get('probe'), model_refused=r['refused'], answerable=r['answerable']) for r in rows]
if any(d['probe'] is None for d in data):
    sys.exit('a record has no probe reading: the answerer must be the 1.5B the probe was fitted on')
y = np.array([d['answerable'] for d in data], dtype=float)
answerable = y == 1
model_refused = np.array([d['model_refused'] for d in data])
wrote = ~model_refused
print(f"{answerable.sum()} answerable, {(~answerable).sum()} unanswerable; the model itself refused "
      f"{model_refused[answerable].mean():.0%} and {model_refused[~answerable].mean():.0%}")
for k in ('probe', 'best passage', 'answer sentence'):
    a = [d[k] for d, w in zip(data, wrote) if w and d['answerable'] and d[k] is not None]
    u = [d[k] for d, w in zip(data, wrote) if w and not d['answerable'] and d[k] is not None]
    print(f"AUC of {k} on the answers written: {auc(a, u):.3f} ({len(a)} answerable / {len(u)} unanswerable)")


def report(name, score):
    refused_at = lambda t: model_refused | (wrote & (score < t))
    curve = [(refused_at(t)[answerable].mean(), refused_at(t)[~answerable].mean()) for t in np.r_[-np.inf, np.sort(score[wrote]) + 1e-9]]
    best = [max((u for a, u in curve if a <= cap + 1e-9), default=None) for cap in (0.10, 0.15, 0.20, 0.25)]
    shown = ' / '.join('—' if b is None else f'{b:.0%}' for b in best)
    print(f"{name}: unanswerable refused at ≤10/15/20/25% of answerable (— out of reach): {shown}")


probe = np.array([d['probe'] for d in data])
print(f"the rule in use (the probe below 0): {(model_refused | (wrote & (probe < 0)))[answerable].mean():.0%} / "
      f"{(model_refused | (wrote & (probe < 0)))[~answerable].mean():.0%}")
report('the probe alone', probe)
for keys in (['best passage', 'answer sentence'], ['probe', 'best passage'], ['probe', 'best passage', 'answer sentence']):
    x = np.array([[1.0] + [0.5 if d[k] is None else float(d[k]) for k in keys] for d in data])
    score = np.full(len(data), np.inf)
    for i in np.where(wrote)[0]:
        train = wrote.copy()
        train[i] = False
        score[i] = x[i] @ fit(x[train], y[train])
    report(' + '.join(keys) + ' (leave-one-out)', score)
