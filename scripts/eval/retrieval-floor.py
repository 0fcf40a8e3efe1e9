#!/usr/bin/env python3
"""How well does the best retrieval similarity alone tell an off-topic question?

The answerability probe was fitted on SQuAD v2, whose unanswerable questions are written
against the paragraph they come from: it has never seen a question about something the
library does not mention at all, and passes some ("What is the capital of Australia?" on
examples/printing-press.md: probe reading 1.01, best similarity 0.113, answered
"Melbourne"). The best cosine of the question to a retrieved chunk (the answerability
check's `retrieval` feature, `qa::best_similarity`) needs no language model, so its
distribution can be measured on every question in seconds.

This splits the SQuAD v2 sample by article as `docmem eval` does (the FNV-1a order of
titles, dev up to 30% of the questions: `crates/cli/src/lab/eval/metrics/split.rs`),
builds one library of the dev articles and one of the test articles (sentence chunks,
the default embedder), and searches each with its own articles' answerable questions
(on-topic) and with 600 questions of the other split's articles (off-topic: about
something the library does not hold). It prints each distribution's quantiles, then for
floors chosen on dev (the similarity under which 0.5, 1 and 2% of dev's answerable
questions fall) the share refused on each side, dev and test.

    python3 scripts/eval/retrieval-floor.py [WORKDIR]   # the CLI built (cargo build -p docmem-cli)
"""

import json
import os
import random
import shutil
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DATA = os.path.join(ROOT, '..', 'shared', 'eval', 'squad-v2-dev-sample.json')
CLI = os.path.join(os.environ.get('CARGO_TARGET_DIR', os.path.join(ROOT, 'target')), 'debug', 'docmem')
DEV_TENTHS = 3


def fnv1a(text):
    h = 0xCBF29CE484222325
    for b in text.encode():
        h = ((h ^ b) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return h


def split(articles):
    """Each article's side, as `group_splits` gives it (every article here has questions)."""
    counts = [(a['title'], sum(len(p['qas']) for p in a['paragraphs'])) for a in articles]
    total = sum(n for _, n in counts)
    sides, dev = ['test'] * len(counts), 0
    for i in sorted(range(len(counts)), key=lambda i: (fnv1a(counts[i][0]), counts[i][0])):
        if (dev + counts[i][1]) * 10 <= total * DEV_TENTHS:
            sides[i], dev = 'dev', dev + counts[i][1]
    return sides


def best_similarities(library, questions):
    """The best chunk-layer vector score among each question's six passages."""
    out = subprocess.run([CLI, 'search', '--library', library, '--json', '--k', '6'], input='\n'.join(questions) + '\n',
                         capture_output=True, text=True, check=True).stdout
    best = []
    for line in out.splitlines():
        scores = [r['score'] for p in json.loads(line)['passages'] for r in p['ranks']
                  if r['kind'] == 'vector' and r['layer'] in ('chunk', 'mixed', 'combined')]
        best.append(max(scores) if scores else None)
    return best


def main():
    work = sys.argv[1] if len(sys.argv) > 1 else '/tmp/docmem-retrieval-floor'
    shutil.rmtree(work, ignore_errors=True)  # libraries built afresh (about 30 s)
    articles = json.load(open(DATA))['data']
    questions = {'dev': [], 'test': []}
    for article, side in zip(articles, split(articles)):
        folder = os.path.join(work, 'docs', side)
        os.makedirs(folder, exist_ok=True)
        path = os.path.join(folder, article['title'] + '.md')
        with open(path, 'w') as f:
            f.write('\n\n'.join(p['context'] for p in article['paragraphs']))
        library = os.path.join(work, 'library-' + side)
        subprocess.run([CLI, 'ingest', path, '--library', library, '--chunker', 'sentence'], check=True, capture_output=True)
        for p in article['paragraphs']:
            for q in p['qas']:
                questions[side].append((q['question'].replace('\n', ' ').strip(), not q['is_impossible']))
    random.seed(7)
    other = {'dev': 'test', 'test': 'dev'}
    scores = {}
    for side in ('dev', 'test'):
        library = os.path.join(work, 'library-' + side)
        scores[side + ' answerable'] = best_similarities(library, [q for q, ok in questions[side] if ok])
        scores[side + ' off-topic'] = best_similarities(library, random.sample([q for q, _ in questions[other[side]]], 600))
    for name, values in scores.items():
        v = sorted(x for x in values if x is not None)
        at = lambda f: v[min(len(v) - 1, int(f * len(v)))]
        print(f'{name:16} {len(v):5} questions: p1 {at(.01):.3f} p5 {at(.05):.3f} p50 {at(.5):.3f} p95 {at(.95):.3f}')
    dev = sorted(x for x in scores['dev answerable'] if x is not None)
    for budget in (0.005, 0.01, 0.02):
        floor = dev[int(budget * len(dev))]
        below = lambda name: 100 * sum(1 for x in scores[name] if x is None or x < floor) / len(scores[name])
        print(f'floor {floor:.3f} (dev: {100 * budget:.1f}% of answerable under it): refused '
              + ', '.join(f'{name} {below(name):.1f}%' for name in scores))


if __name__ == '__main__':
    main()
