"""MEMORY.md's entries by meaning (issue 31): does a context's long-term section hold the
entry a query is about, by words alone and with the entries' vectors?

The admission sets (`../shared/eval/admission`, three sets by three authors) label what
belongs in MEMORY.md (Q1) and in a daily note (Q2), each in its author's words (`text`).
One MEMORY.md holds every Q1 and Q2 label's text as an entry (111: a file of the kind a
year of use leaves, 200 at most). Each Q1 label is asked about in three ways:
- `paraphrase`: its `paraphrases` line, the fact in other words (often the other
  language);
- `original`: the user's message it was said in (its `evidence`);
- `restated`: each message of a later session that said it again (`restated`): what
  a prompt touching the rule looks like, the closest to a context's real query.

The order is the one a context gives the section (`memoryd.recall.long_term.ranked`:
word matches, fused with the `depth` entries nearest the query, then the newest), with
cosines from the model's own process (`memoryd.embed.model.Model`: the passages as the
worker embeds them, the query's cosines as a context asks). Scored: the asked entry in
the first 5 and 10 (the share of a 2,000-token budget holds about 10-15) and its
reciprocal rank. The fusion's depth and weight are chosen leaving one set out (fit on
two, score the third; pooled); the shipped setting's row is given beside it. The ± is a
95% paired bootstrap interval against words alone.

    nice -n 10 .venv/bin/python bench/eval_embed_entries.py

About 20 s: 111 passages and 133 queries through the model.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from memoryd.embed import QUERY_CHARS  # noqa: E402
from memoryd.embed.model import Model  # noqa: E402
from memoryd.memory import parse  # noqa: E402
from memoryd.recall import long_term  # noqa: E402

SETS = ("dev", "dev-b", "heldout-c")
GRID = [(d, w) for d in (5, 10, 20) for w in (0.5, 1.0, 2.0)]
KINDS = ("paraphrase", "original", "restated")


def load(adm: Path) -> tuple[Any, list[dict[str, Any]]]:
    """The MEMORY.md of every Q1 and Q2 label, and the Q1 labels' probes."""
    labels, said = [], {}
    for s in SETS:
        for item in json.loads((adm / s / "labels.json").read_text()):
            labels.append(item | {"set": s})
        for f in sorted((adm / s).glob("*/*.jsonl")):
            for line in f.read_text().splitlines():
                m = json.loads(line)
                said[s, m["id"]] = m["content"]
    kept = [x for x in labels if x["class"] in ("Q1", "Q2")]
    doc = parse("".join(f"{x['date']}|manual|{x['text'].replace('|', '/')}\n"
                        for x in kept))
    line = {x["id"]: e.line for x, e in zip(kept, doc.entries)}
    probes = []
    for x in labels:
        if x["class"] != "Q1":
            continue
        asks = [("paraphrase", p) for p in x.get("paraphrases") or []]
        asks += [("original", said[x["set"], ev]) for ev in x["evidence"]]
        asks += [("restated", said[x["set"], ev]) for r in x.get("restated") or []
                 for ev in r["evidence"]]
        probes += [{"set": x["set"], "kind": k, "q": q, "entry": line[x["id"]]}
                   for k, q in asks]
    return doc, probes


def rank_of(doc: Any, p: dict[str, Any], near: dict[int, float] | None, d: int,
            w: float) -> int:
    order = [e.line for e, _ in long_term.ranked(doc, p["q"], near, depth=d, w=w)]
    return order.index(p["entry"]) + 1 if p["entry"] in order else 10_000


def scores(r: int) -> dict[str, float]:
    return {"@5": float(r <= 5), "@10": float(r <= 10), "MRR": 1.0 / r}


def mean(ms: list[dict[str, float]]) -> dict[str, float]:
    return {k: statistics.fmean(m[k] for m in ms) for k in ("@5", "@10", "MRR")}


def ci(base: list[dict[str, float]], other: list[dict[str, float]], key: str
       ) -> tuple[float, float]:
    d = [o[key] - b[key] for b, o in zip(base, other)]
    rng = random.Random(0)
    means = sorted(statistics.fmean(rng.choices(d, k=len(d))) for _ in range(10_000))
    return means[250], means[9749]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--admission", type=Path,
                    default=ROOT.parent / "shared" / "eval" / "admission" / "data")
    args = ap.parse_args(argv)
    doc, probes = load(args.admission)
    model = Model(idle_s=3600)
    try:
        vecs = model.passages([long_term.text_of(e) for e in doc.entries])
        for p in probes:
            cos = model.cosines(p["q"][:QUERY_CHARS], vecs)
            p["near"] = {e.line: c for e, c in zip(doc.entries, cos)}
    finally:
        model.release()
    words = [scores(rank_of(doc, p, None, 0, 0.0)) for p in probes]
    at = {g: [scores(rank_of(doc, p, p["near"], *g)) for p in probes] for g in GRID}
    held, chosen = [None] * len(probes), []
    for s in SETS:
        fit = [i for i, p in enumerate(probes) if p["set"] != s]
        g = max(GRID, key=lambda g: (sum(at[g][i]["MRR"] for i in fit),
                                     sum(at[g][i]["@10"] for i in fit), -g[0]))
        chosen.append((s, g))
        for i, p in enumerate(probes):
            if p["set"] == s:
                held[i] = at[g][i]
    shipped = at[long_term.DEPTH, long_term.W_VECTOR]
    counts = [(k, sum(p["kind"] == k for p in probes)) for k in KINDS]
    print(f"{len(doc.entries)} entries, {len(probes)} probes "
          f"({', '.join(f'{k} {n}' for k, n in counts)}); "
          f"chosen leaving each set out: "
          + ", ".join(f"{s} depth {d} w {w:g}" for s, (d, w) in chosen) + "\n")
    print("| probes | ranking | in 5 | in 10 | MRR | Δ in 10 | Δ MRR |")
    print("|---|---|---|---|---|---|---|")
    for kind in (None, *KINDS):
        idx = [i for i, p in enumerate(probes) if kind is None or p["kind"] == kind]
        base = [words[i] for i in idx]
        for name, ms in (("words", words), ("held out by set", held),
                         (f"shipped (depth {long_term.DEPTH}, w {long_term.W_VECTOR:g})",
                          shipped)):
            ms = [ms[i] for i in idx]
            m = mean(ms)
            delta = ("", "") if ms == base else tuple(
                "{:+.3f} to {:+.3f}".format(*ci(base, ms, k)) for k in ("@10", "MRR"))
            print(f"| {kind or 'all'} ({len(idx)}) | {name} | {m['@5']:.3f} | "
                  f"{m['@10']:.3f} | {m['MRR']:.3f} | {delta[0]} | {delta[1]} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
