"""Fit the admission scorer's signal weights on labelled admission sets, and report them
cross-validated by set (fit on the others, score the one left out).

Every user sentence of a set's sessions is read by memoryd.consolidate.signals (in its
conversation: the assistant's next turn is read too) and labelled from the set's
labels.json: a sentence of a message a Q1 item names as evidence (or as a restatement)
that holds the item's keywords is positive; every other user sentence is negative. A
logistic regression with an L2 penalty is fitted on the sentences of all sets but one
and scored on the one left out (precision and recall of "Q1" at the scorer's
threshold); then the weights are fitted on every set and printed as scorer.WEIGHTS.

    .venv/bin/python bench/admission_fit.py [--sets dev dev-b heldout-c] [--l2 1.0]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import unicodedata
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from memoryd.consolidate import scorer  # noqa: E402
from memoryd.summarize.extractive import sentences  # noqa: E402

SHARED = Path(os.environ.get("MEMORYD_SHARED", "/work/shared"))
DATA = SHARED / "eval" / "admission" / "data"
BETA = float(os.environ.get("ADMISSION_BETA", "2"))


def norm(s: str) -> str:
    return unicodedata.normalize("NFKC", s).casefold()


def hits(text: str, match: list[list[str]]) -> int:
    t = norm(text)
    return max((sum(norm(k) in t for k in alt) if all(norm(k) in t for k in alt) else
                sum(norm(k) in t for k in alt) / 10 for alt in match), default=0)


def examples(which: str) -> list[tuple[dict[str, float], int, str]]:
    """(signals, label, sentence) for every user sentence of the set."""
    labels = json.loads((DATA / which / "labels.json").read_text(encoding="utf-8"))
    q1: dict[str, list[list[list[str]]]] = {}
    for it in labels:
        if it["class"] != "Q1":
            continue
        ev = list(it.get("evidence") or [])
        for r in it.get("restated") or []:
            ev += r.get("evidence") or []
        for e in ev:
            q1.setdefault(e, []).append(it["match"])
    out = []
    for f in sorted((DATA / which).glob("*/*.jsonl")):
        msgs = [json.loads(x) for x in f.read_text(encoding="utf-8").splitlines() if x.strip()]
        for i, m in enumerate(msgs):
            if m["role"] != "user":
                continue
            ack = next((n["content"] for n in msgs[i + 1:] if n["role"] == "assistant"), None)
            if next((n for n in msgs[i + 1:] if n["role"] == "user"), None) is not None:
                nxt_user = msgs.index(next(n for n in msgs[i + 1:] if n["role"] == "user"))
                if ack is not None and msgs.index(next(
                        n for n in msgs[i + 1:] if n["role"] == "assistant")) > nxt_user:
                    ack = None
            sents = [s for s in sentences(m["content"]) if s.strip()]
            pos: set[int] = set()
            for match in q1.get(m["id"], []):
                scored = [(hits(s, match), k) for k, s in enumerate(sents)]
                full = [k for h, k in scored if h >= 1]
                if full:
                    pos.update(full)
                elif scored:
                    pos.add(max(scored)[1])
            for k, s in enumerate(sents):
                out.append((scorer.signals_of(s, ack=ack), int(k in pos), s))
    return out


def fit(data: list[tuple[dict[str, float], int, str]], l2: float, epochs: int = 400
        ) -> dict[str, float]:
    names = sorted({n for x, _, _ in data for n in x} | {"bias"})
    w = dict.fromkeys(names, 0.0)
    n_pos = sum(y for _, y, _ in data)
    # balance the classes: positives are a few percent of the sentences
    wpos = (len(data) - n_pos) / max(1, n_pos) / 2
    lr = 0.1
    for _ in range(epochs):
        grad = dict.fromkeys(names, 0.0)
        for x, y, _ in data:
            z = w["bias"] + sum(w[n] * v for n, v in x.items())
            p = 1 / (1 + math.exp(-max(-30.0, min(30.0, z))))
            g = (p - y) * (wpos if y else 1.0)
            grad["bias"] += g
            for n, v in x.items():
                grad[n] += g * v
        for n in names:
            reg = 0.0 if n == "bias" else l2 * w[n]
            w[n] -= lr * (grad[n] + reg) / len(data) * 10
    # the threshold: the bias that gives the best F-beta on the training sentences
    # (recall weighs `beta` times: a missed rule costs the user more than a line they
    # delete, and the sets' sentence labels are noisier on the positive side)
    def f2(b: float) -> float:
        tp = fp = fn = 0
        for x, y, _ in data:
            q1 = scorer.weigh(x, {**w, "bias": b}) >= 0
            tp += q1 and y
            fp += q1 and not y
            fn += (not q1) and y
        b2 = BETA * BETA
        return (1 + b2) * tp / max(1, (1 + b2) * tp + b2 * fn + fp)
    w["bias"] = max((w["bias"] + d / 10 for d in range(-15, 16)), key=f2)
    return w


def evaluate(w: dict[str, float], data: list[tuple[dict[str, float], int, str]]
             ) -> tuple[float, float, int, int]:
    tp = fp = fn = 0
    for x, y, _ in data:
        q1 = scorer.weigh(x, w) >= 0
        tp += q1 and y
        fp += q1 and not y
        fn += (not q1) and y
    return tp / max(1, tp + fp), tp / max(1, tp + fn), tp + fn, fp


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sets", nargs="+", default=["dev", "dev-b", "heldout-c"])
    ap.add_argument("--l2", type=float, default=1.0)
    ap.add_argument("-v", action="store_true", help="list the left-out set's misses")
    a = ap.parse_args()
    per = {s: examples(s) for s in a.sets}
    print(f"{'left out':<10} {'sentences':>9} {'Q1':>4} {'precision':>9} {'recall':>7} {'fp':>4}")
    for s in a.sets:
        train = [e for o in a.sets if o != s for e in per[o]]
        w = fit(train, a.l2)
        prec, rec, n, fp = evaluate(w, per[s])
        print(f"{s:<10} {len(per[s]):>9} {n:>4} {prec:>9.2f} {rec:>7.2f} {fp:>4}")
        if a.v:
            for x, y, text in per[s]:
                q1 = scorer.weigh(x, w) >= 0
                if q1 != bool(y):
                    print(f"   {'MISS' if y else 'FP  '} {scorer.weigh(x, w):+.1f} "
                          f"{sorted(x)} {text[:120]}")
    w = fit([e for s in a.sets for e in per[s]], a.l2)
    print("\nWEIGHTS = {")
    for n in sorted(w, key=lambda n: -abs(w[n])):
        print(f'    "{n}": {w[n]:.2f},')
    print("}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
