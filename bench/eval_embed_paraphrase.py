"""The vector signal on statements in other words (issue 31): the admission sets' labels
(`../shared/eval/admission`, three sets by three authors) as retrieval probes, beside the
LongMemEval dev questions.

Each labelled item names the message(s) where it was said (`evidence`, and `restated`
where it was said again) and states it in its author's words (`text`), some also in the
other language (`paraphrases`: a Chinese line for an English fact, or the reverse). Each
statement is a probe whose answer is known: search with it, find the message. Unlike the
LongMemEval dev split (`eval_embed.py`), where memoryd's lexical ranking was tuned and 26
of 30 questions already have R@10 = 1, these were never used to tune the ranking.

The store holds the three sets' sessions (a project per folder) and the LongMemEval dev
haystacks (~15k turns: distractors for the labels, and each dev question's own haystack).
Every embeddable unit gets its vector (what the worker would store, cut to
`--max-chars`), so the union is measured on a store fully embedded. A label searches the
whole store; a dev question its haystack's project. Rows: lexical; the union with the
units nearest the probe by meaning (`memoryd.recall.union`, through the code search runs:
`retrieve_sync` with a `memoryd.embed.VectorQuery`, the model's process searching the
store's vectors) at each weight, at the weight chosen leaving one set out (four: dev,
dev-b, heldout-c, lme-dev; pooled), and at w 1 with lists of 10 and 50 instead of 30. The
± columns are a 95% paired bootstrap interval of the row minus lexical.

    nice -n 10 .venv/bin/python bench/eval_embed_paraphrase.py --home /work/runs/para

The first run embeds ~15k units (~15 min on two cores, `--jobs 2`; `--vectors-from` an
`eval_embed.py` home whose every unit was embedded takes its vectors instead); the home
keeps them.

`--floor` adds what a cosine floor on the hits only the vectors found would have to tell
apart (none ships): the cosines of such hits in each probe's top 10 that are its evidence,
that are not, and those of the same probe searched in a scope where nothing answers it (a
label in a LongMemEval haystack, a dev question in an admission project).
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
from collections import Counter
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, "/work/shared")

from bench.eval_embed import (  # noqa: E402
    WEIGHTS, build, embed_all, held_out, mean, print_table, rank)
from bench.eval_ranker import _default_sessions  # noqa: E402
from eval.common import load_qrels  # noqa: E402
from memoryd.embed import Embedder, VectorQuery  # noqa: E402
from memoryd.recall.retrieval import PARAMS, retrieve_sync  # noqa: E402

SETS = ("dev", "dev-b", "heldout-c")
DEPTHS = (10, 50)  # each list's length in the union, beside the shipped 30


def admission_root() -> Path:
    return _default_sessions().parent.parent / "admission" / "data"


def corpus(out: Path, adm: Path, lme: Path) -> None:
    """One folder per project: each admission project (sessions only, never labels.json)
    and each LongMemEval dev haystack."""
    if out.exists():
        return
    tmp = out.with_suffix(".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    for s in SETS:
        for proj in sorted(p for p in (adm / s).iterdir() if p.is_dir()):
            shutil.copytree(proj, tmp / f"{s}__{proj.name}")
    for scope in sorted(p for p in lme.iterdir() if p.is_dir()):
        shutil.copytree(scope, tmp / f"lme__{scope.name}")
    tmp.rename(out)


def probes(adm: Path) -> list[dict[str, Any]]:
    """Every labelled statement with the messages it was said in: the label's text and
    each of its paraphrases."""
    out = []
    for s in SETS:
        for item in json.loads((adm / s / "labels.json").read_text()):
            ev = list(item.get("evidence") or [])
            for r in item.get("restated") or []:
                ev += r.get("evidence") or []
            if not ev:
                continue
            texts = [("text", item["text"])] + [("paraphrase", p)
                                                for p in item.get("paraphrases") or []]
            for i, (kind, t) in enumerate(texts):
                out.append({"set": s, "kind": kind, "cls": item["class"],
                            "q": {"qid": f"{s}:{item['id']}:{i}", "question": t,
                                  "evidence": ev}})
    return out


def vector_only(store: Any, embedder: Embedder, question: str, project: str | None
                ) -> list[tuple[str, float]]:
    """(record id, cosine) of the top 10's hits that only the vectors found."""
    vq = VectorQuery(embedder, question)
    got = store.read_sync(lambda c: retrieve_sync(c, store.index, question, k=10,
                                                  project=project, params=PARAMS, vq=vq))
    return [(h.record_id, h.signals["vector"]) for h in got.hits
            if "vector" in h.signals and "lexical_rank" not in h.signals]


def floor_study(store: Any, embedder: Embedder, rows: list[dict[str, Any]],
                projects: dict[str, str]) -> None:
    lme = sorted(p for n, p in projects.items() if n.startswith("lme__"))
    adm = sorted(p for n, p in projects.items() if not n.startswith("lme__"))
    found: dict[str, list[float]] = {"evidence": [], "not evidence": [], "wrong scope": [],
                                     "wrong scope, each probe's best": []}
    for i, r in enumerate(rows):
        ev = set(r["q"]["evidence"])
        for rid, cos in vector_only(store, embedder, r["q"]["question"], r["project"]):
            found["evidence" if rid in ev else "not evidence"].append(cos)
        other = adm if r["kind"] == "lme" else lme  # a fixed pick: the run repeats
        wrong = [c for _, c in vector_only(store, embedder, r["q"]["question"],
                                           other[i % len(other)])]
        found["wrong scope"] += wrong
        found["wrong scope, each probe's best"] += [max(wrong)] if wrong else []
    print("\ncosines of the top 10's hits only the vectors found "
          "(min, 10th, 25th, 50th, 75th, 90th percentile, max):")
    for name, xs in found.items():
        xs.sort()
        qs = [xs[int(q * (len(xs) - 1))] for q in (0, .1, .25, .5, .75, .9, 1)] if xs else []
        print(f"  {name} (n={len(xs)}): " + " ".join(f"{x:.3f}" for x in qs))


def table(name: str, rows: list[dict[str, Any]], cols: list[tuple[str, list]]) -> None:
    print(f"\n{name}: {len(rows)} probes\n")
    print_table(cols, [r["lexical"] for r in rows])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--home", type=Path, default=Path("/tmp/md-eval-para"))
    ap.add_argument("--max-chars", type=int, default=512)
    ap.add_argument("--jobs", type=int, default=2, help="model processes for the first embed")
    ap.add_argument("--vectors-from", type=Path, default=None,
                    help="a home whose vectors of the same texts are reused")
    ap.add_argument("--floor", action="store_true",
                    help="also the cosines a floor on vector-only hits would separate")
    args = ap.parse_args(argv)
    adm, home = admission_root(), args.home.resolve()
    sessions = home / "sessions"
    home.mkdir(parents=True, exist_ok=True)
    corpus(sessions, adm, _default_sessions())
    store = build(sessions, home / "memoryd")
    rows = probes(adm)
    try:
        seen = Counter(store.read_sync(lambda c: [r[0] for r in c.execute(
            "SELECT record_id FROM units")]))
        dup = [e for r in rows for e in r["q"]["evidence"] if seen[e] > 1]
        assert not dup, f"evidence ids not unique in the store: {dup[:5]}"
        # a tool's output is stored under its own hash id (and never embedded): a probe
        # keeps the messages among its evidence, and goes if it has none
        for r in rows:
            r["q"]["evidence"] = [e for e in r["q"]["evidence"] if seen[e]]
        dropped = sum(not r["q"]["evidence"] for r in rows)
        rows = [r for r in rows if r["q"]["evidence"]]
        print(f"{len(rows)} probes; {dropped} left out (said only in a tool's output)",
              file=sys.stderr)
        embed_all(store, args.max_chars, args.jobs, args.vectors_from)
        projects = dict(store.read_sync(lambda c: [(Path(p).name, p) for (p,) in c.execute(
            "SELECT DISTINCT project FROM sessions")]))
        for r in rows:
            r["project"] = None
        for q in load_qrels(_default_sessions()):  # a question searches its own haystack
            rows.append({"set": "lme-dev", "kind": "lme", "cls": q["category"],
                         "project": projects[f"lme__{q['scope']}"],
                         "q": {"qid": f"lme:{q['qid']}", "question": q["question"],
                               "evidence": q["evidence"]}})
        embedder = Embedder(store, max_chars=args.max_chars, idle_s=3600)
        for r in rows:
            rank(store, embedder, r, DEPTHS)
        if args.floor:
            floor_study(store, embedder, rows, projects)
        embedder.model.release()
    finally:
        store.close_sync()
    cv, chosen = held_out(rows, "set")
    cols = [("lexical (memoryd without vectors)", [r["lexical"] for r in rows])]
    cols += [(f"union, w {w}" + (" (ships)" if w == PARAMS.w_vector else ""),
              [r["union"][w] for r in rows]) for w in WEIGHTS]
    cols += [("union, w chosen on the other sets", cv)]
    cols += [(f"union, w {PARAMS.w_vector}, lists of {n}", [r["depth"][n] for r in rows])
             for n in DEPTHS]
    groups = [("every probe", lambda r: True),
              ("admission labels, the label's text", lambda r: r["kind"] == "text"),
              ("admission labels, a paraphrase (most in the other language)",
               lambda r: r["kind"] == "paraphrase"),
              ("LongMemEval_S dev questions (each in its haystack)",
               lambda r: r["kind"] == "lme")]
    for name, keep in groups:
        idx = [i for i, r in enumerate(rows) if keep(r)]
        table(name, [rows[i] for i in idx], [(n, [ms[i] for i in idx]) for n, ms in cols])
    print("\nby set, R@10 / NDCG@10:")
    for s in sorted({r["set"] for r in rows}):
        idx = [i for i, r in enumerate(rows) if r["set"] == s]
        ms = {n: mean([v[i] for i in idx]) for n, v in cols
              if "chosen" in n or n.startswith("lexical")}
        print(f"  {s} ({len(idx)}): " + "; ".join(
            f"{n}: {m['R@10']:.3f} / {m['NDCG@10']:.3f}" for n, m in ms.items()))
    print("\nw chosen on the other sets (set left out: w): "
          + ", ".join(f"{s}: {w}" for s, w in chosen))
    qs = sorted(r["nearest_s"] for r in rows)
    print(f"\nnearest units (query embedding + exact search over the store's vectors, the "
          f"model's process): p50 {1000 * statistics.median(qs):.1f} ms, p90 "
          f"{1000 * qs[int(0.9 * len(qs))]:.1f} ms ({len(qs)} probes)")
    print(f"\nprobes per set: {dict(Counter(r['set'] for r in rows))}; "
          f"kinds: {dict(Counter(r['kind'] for r in rows))}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
