#!/usr/bin/env python3
"""Do non-linear heads read answerability from the answerer's state better than the
linear probe in use?

The probe in use is a logistic regression over one layer's standardized state at the
question's last token. This fits other heads on the same states (a stronger penalty,
principal components, an RBF support-vector machine, a small MLP) on one set of dev
questions and scores each on questions held out, by AUC.

    python3 scripts/eval/nonlinear-probe.py --train dev-states-a.jsonl \
        --held-out dev-120-states.jsonl [--layers 15,16] [--groups SQUAD.json]

Inputs are `docmem eval answers --states` files; training questions that are also in
the held-out file are left out. With `--groups` (the SQuAD data the states were recorded
on), it also scores probes over 8 to 256 principal components, and over the full state,
out of fold on the training questions alone (5 folds by paragraph, three penalties): how
a choice among them would be made without the held-out questions. Needs scikit-learn
(the bench venv has it).
"""
import argparse
import json

import numpy as np
from sklearn.decomposition import PCA
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import roc_auc_score
from sklearn.model_selection import GroupKFold
from sklearn.neural_network import MLPClassifier
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler
from sklearn.svm import SVC


def load(path, layer):
    """The question-token states at `layer`, the labels and the ids of one states file."""
    x, y, ids = [], [], []
    with open(path) as f:
        for line in f:
            r = json.loads(line)
            x.append(r["question_states"][r["layers"].index(layer)])
            y.append(int(r["answerable"]))
            ids.append(r["id"])
    return np.array(x), np.array(y), ids


def heads():
    """Each head, as a scikit-learn pipeline over standardized states."""
    scaled = lambda *steps: make_pipeline(StandardScaler(), *steps)  # noqa: E731
    return {
        "logistic, C = 0.01": scaled(LogisticRegression(C=0.01, max_iter=3000)),
        "logistic, C = 0.003": scaled(LogisticRegression(C=0.003, max_iter=3000)),
        "64 principal components, logistic": scaled(PCA(64, random_state=0), LogisticRegression(C=0.1, max_iter=3000)),
        "RBF SVM, C = 1": scaled(SVC(C=1.0, gamma="scale")),
        "RBF SVM, C = 3": scaled(SVC(C=3.0, gamma="scale")),
        "MLP 64, decay 1": scaled(MLPClassifier((64,), alpha=1.0, max_iter=2000, random_state=0)),
        "MLP 64, decay 10": scaled(MLPClassifier((64,), alpha=10.0, max_iter=2000, random_state=0)),
        "64 principal components, RBF SVM": scaled(PCA(64, random_state=0), SVC(C=1.0, gamma="scale")),
    }


def paragraph_of(data_path):
    """Each question id's paragraph (article title and paragraph number)."""
    with open(data_path) as f:
        data = json.load(f)["data"]
    return {q["id"]: f"{a['title']}/{j}" for a in data for j, p in enumerate(a["paragraphs"]) for q in p["qas"]}


def component_choice(x, y, groups, layer):
    """Out-of-fold AUC on the training questions of logistic probes over k principal
    components (k = None: the full state), 5 folds by paragraph."""
    for k in (8, 16, 32, 64, 128, 256, None):
        for c in (0.01, 0.1, 1.0):
            scores = np.zeros(len(y))
            for train, test in GroupKFold(5).split(x, y, groups):
                # The full state needs a penalty 100 times stronger to read as well.
                steps = [PCA(k, random_state=0)] if k else []
                head = make_pipeline(StandardScaler(), *steps, LogisticRegression(C=c if k else c / 100, max_iter=5000))
                scores[test] = head.fit(x[train], y[train]).decision_function(x[test])
            name = f"{k} components" if k else "the full state"
            print(f"| {layer} | {name} | {c if k else c / 100:g} | {roc_auc_score(y, scores):.3f} |")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--train", required=True)
    ap.add_argument("--held-out", required=True)
    ap.add_argument("--layers", default="15,16")
    ap.add_argument("--groups", help="the SQuAD data the states were recorded on: also choose among principal components by folds")
    args = ap.parse_args()
    print("| head | " + " | ".join(f"layer {l} AUC" for l in args.layers.split(",")) + " |")
    print("| --- |" + " --- |" * len(args.layers.split(",")))
    results = {}
    for layer in (int(l) for l in args.layers.split(",")):
        xh, yh, held_ids = load(args.held_out, layer)
        x, y, ids = load(args.train, layer)
        held = set(held_ids)
        keep = np.array([i not in held for i in ids])
        x, y = x[keep], y[keep]
        for name, head in heads().items():
            head.fit(x, y)
            score = head.decision_function(xh) if hasattr(head, "decision_function") else head.predict_proba(xh)[:, 1]
            results.setdefault(name, []).append(roc_auc_score(yh, score))
    for name, aucs in results.items():
        print(f"| {name} | " + " | ".join(f"{a:.3f}" for a in aucs) + " |")
    if args.groups:
        paragraph = paragraph_of(args.groups)
        print("\n| layer | probe | C | AUC out of fold (training questions, folds by paragraph) |")
        print("| --- | --- | --- | --- |")
        for layer in (int(l) for l in args.layers.split(",")):
            xh, _, held_ids = load(args.held_out, layer)
            x, y, ids = load(args.train, layer)
            held = set(held_ids)
            keep = [i for i, q in enumerate(ids) if q not in held]
            component_choice(x[keep], y[keep], [paragraph[ids[i]] for i in keep], layer)


if __name__ == "__main__":
    main()
