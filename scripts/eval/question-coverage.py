#!/usr/bin/env python3
"""Does lexical coverage of the question add to the answerability probe?

SQuAD v2's unanswerable questions are written against the paragraph they come from, often
with one word changed (a name, a date, a negation), so the question's own words missing
from the passages, or from the sentence the answer was taken from, are a classic signal.
This reads the records of `docmem eval answers` (which keep the passages shown), computes
three such features, prints each one's AUC beside the probe's, then fits a logistic rule
on the answers the model and the probe let through (leave-one-out) and prints the share
of answerable and unanswerable questions refused at a sweep of thresholds. Run it on a
dev split; the rule in use is the probe with the model's own refusals on top.
Needs numpy (the bench venv has it).

    python3 scripts/eval/question-coverage.py dev.jsonl
"""
import json
import re
import sys

import numpy as np

TERMS_RS = __file__.rsplit('/scripts/', 1)[0] + '/crates/core/src/route/terms.rs'
block = open(TERMS_RS).read().split('const STOPWORDS', 1)[1].split('];', 1)[0]
STOPWORDS = set(re.findall(r'"([^"]+)"', block))


def stems(text):
    """Content words, lower-cased, cut to five characters (names/named, printed/printing)."""
    return {w[:5] for w in re.findall(r'[^\W_]+', text.lower()) if w not in STOPWORDS}


def refusal(text):
    return bool(re.search(r'not in the documents|don.t know|do not know', text, re.I)) or not text.strip()


def features(r):
    q = stems(r['question'])
    passages = [stems(p) for p in r['passages']]
    union = set().union(*passages) if passages else set()
    best = max((len(q & p) / max(1, len(q)) for p in passages), default=0.0)
    # The sentence sharing most of the answer's words (not the question's), with its
    # neighbours: how much of the question it holds.
    answer = stems(re.sub(r'\[\d+\]', '', r['written'])) - q
    near, most = None, 0
    for p in r['passages']:
        sentences = [s for s in re.split(r'(?<=[.!?])\s+', p) if s]
        for i, s in enumerate(sentences):
            shared = len(answer & stems(s))
            if shared > most:
                around = set().union(*(stems(x) for x in sentences[max(0, i - 1):i + 2]))
                near, most = len(q & around) / max(1, len(q)), shared
    return {'best passage': best, 'all passages': len(q & union) / max(1, len(q)), 'answer sentence': near}


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
rows = [r for r in rows if r.get('method') == 'ours' and 'passages' in r]
data = [dict(features(r), probe=(r.get('evidence') or {}).get('probe'), model_refused=refusal(r['written']), answerable=r['answerable']) for r in rows]
y = np.array([d['answerable'] for d in data], dtype=float)
answerable = y == 1
in_use = np.array([d['model_refused'] or (d['probe'] is not None and d['probe'] < 0) for d in data])
print(f"{answerable.sum()} answerable, {(~answerable).sum()} unanswerable; in use: "
      f"{in_use[answerable].mean():.0%} of answerable refused, {in_use[~answerable].mean():.0%} of unanswerable")
names = ['probe', 'best passage', 'all passages', 'answer sentence']
for k in names:
    a = [d[k] for d in data if d['answerable'] and d[k] is not None]
    u = [d[k] for d in data if not d['answerable'] and d[k] is not None]
    print(f"AUC {k}: {auc(a, u):.3f} ({len(a)} / {len(u)})")
let_through = ~in_use
for keys in (['answer sentence'], ['best passage', 'answer sentence'], ['probe', 'best passage', 'answer sentence']):
    x = np.array([[1.0] + [0.5 if d[k] is None else float(d[k] or 0.0) for k in keys] for d in data])
    score = np.full(len(data), np.inf)
    for i in np.where(let_through)[0]:
        train = let_through.copy()
        train[i] = False
        score[i] = x[i] @ fit(x[train], y[train])
    sweep = [f"{t:+.2f}: {(in_use | (score < t))[answerable].mean():.0%}/{(in_use | (score < t))[~answerable].mean():.0%}" for t in (-0.5, 0.0, 0.25, 0.5)]
    print(f"then {' + '.join(keys)}, refused below (answerable/unanswerable refused): {'  '.join(sweep)}")
