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
`--max-chars`), so fusion is measured on a store fully embedded. A label searches the
whole store; a dev question its haystack's project. Rows: lexical; fusion in the
lexical candidates (what ships: the best 30 re-ordered, `memoryd.recall.fusion`) at each
weight, the shipped gate, and the weight or gate chosen on the other sets; and the union
of the lexical top `--depth` with e5's top `--depth` over the store (or the project),
exact here (`--ann`: through a usearch index, as memoryd would ask one), by reciprocal
rank at each weight and at the weight chosen on the other sets. Choices are made leaving
one set out (four: dev, dev-b, heldout-c, lme-dev), pooled. The ± columns are a 95%
paired bootstrap interval of the row minus lexical.

    nice -n 10 .venv/bin/python bench/eval_embed_paraphrase.py --home /work/runs/para

The first run embeds ~15k units (~15 min on two cores, `--jobs 2`; `--vectors-from` an
`eval_embed.py` home whose every unit was embedded takes its vectors instead); the home
keeps them.
"""

from __future__ import annotations

import argparse
import dataclasses
import itertools
import json
import shutil
import sys
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, "/work/shared")

from bench.eval_embed import (  # noqa: E402
    WEIGHTS, _gate_w, build, fit_gate, mean, print_table, score, search)
from bench.eval_ranker import _default_sessions  # noqa: E402
from eval.common import load_qrels  # noqa: E402
from memoryd.daemon.store_index import open_store_sync  # noqa: E402
from memoryd.embed.model import Model  # noqa: E402
from memoryd.paths import resolve_paths  # noqa: E402
from memoryd.recall.retrieval import PARAMS, retrieve_sync  # noqa: E402
from memoryd.store import Store, vectors  # noqa: E402

SETS = ("dev", "dev-b", "heldout-c")
DEEP = (100, 300)  # lexical candidates fused, deeper than the shipped 30


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


def embed_all(store: Store, max_chars: int, jobs: int, reuse: Path | None) -> None:
    """Every embeddable unit's vector, as the worker would store it; a unit whose text
    another unit has (haystacks share sessions) is embedded once. `reuse`: another home
    whose vectors were made the same way (`eval_embed.py --home` with every unit
    embedded): a unit with the same text there takes its vector (the model is
    deterministic)."""
    todo = store.read_sync(lambda c: vectors.pending(c, limit=10**9, max_chars=max_chars))
    if not todo:
        return
    got: dict[str, bytes] = {}
    if reuse is not None:
        other = open_store_sync(resolve_paths(reuse).db)
        try:
            got = other.read_sync(lambda c: {
                vectors.unit_text(r[0], r[1], r[2], max_chars): bytes(r[3])
                for r in c.execute(f"SELECT u.kind, substr(u.content, 1, {max_chars}), "
                                   "u.one_liner, v.vec FROM units u JOIN unit_vectors v "
                                   "ON v.unit_id = u.id")})
        finally:
            other.close_sync()
        print(f"{sum(t in got for _, t in todo)} of {len(todo)} units' vectors from {reuse}",
              file=sys.stderr)
    texts = [t for t in dict.fromkeys(t for _, t in todo) if t not in got]
    print(f"embedding {len(texts)} texts (of {len(todo)} units without a vector) on {jobs} "
          "processes", file=sys.stderr)
    models = [Model(idle_s=3600) for _ in range(jobs)]
    t0 = time.monotonic()

    def part(i: int) -> dict[str, bytes]:
        mine = texts[i::jobs]
        return dict(zip(mine, models[i].passages(mine)))

    with ThreadPoolExecutor(jobs) as ex:
        for d in ex.map(part, range(jobs)):
            got.update(d)
    for m in models:
        m.release()
    print(f"  {time.monotonic() - t0:.0f} s", file=sys.stderr)
    store.write_sync(lambda c: vectors.save(c, [(uid, got[t]) for uid, t in todo]))


class VectorList:
    """The e5 ranking over every embedded unit of the store (or of one project): exact,
    brute force (what a vector index would answer; the bench may use numpy, the daemon
    may not), or with `ann` through a usearch HNSW index over the whole store, its top
    `ANN_POOL` then kept to the project, as an index in memoryd would be asked."""

    ANN_POOL = 200

    def __init__(self, store: Store, ann: bool = False) -> None:
        import numpy as np

        rows = store.read_sync(lambda c: c.execute(
            "SELECT u.record_id, s.project, v.vec FROM units u JOIN unit_vectors v ON "
            "v.unit_id = u.id JOIN sessions s ON s.id = u.session_pk").fetchall())
        self.ids = [r[0] for r in rows]
        self.project = [r[1] for r in rows]
        i8 = np.frombuffer(b"".join(bytes(r[2]) for r in rows), dtype=np.int8)
        i8 = i8.reshape(len(rows), -1)
        self.index = None
        if ann:
            from usearch.index import Index

            self.index = Index(ndim=i8.shape[1], metric="cos", dtype="i8")
            self.index.add(np.arange(len(rows), dtype=np.uint64), i8, threads=1)
            return
        m = i8.astype(np.float32)
        self.m = m / np.maximum(np.linalg.norm(m, axis=1, keepdims=True), 1.0)
        self.of: dict[str, Any] = {}
        for i, r in enumerate(rows):
            self.of.setdefault(r[1], []).append(i)
        self.of = {k: np.asarray(v) for k, v in self.of.items()}

    def top(self, qvec: Any, project: str | None, n: int) -> list[str]:
        import numpy as np

        q = np.asarray(qvec, dtype=np.float32)
        if self.index is not None:
            keys = self.index.search(q, self.ANN_POOL, threads=1).keys
            kept = [int(i) for i in keys if project is None or self.project[i] == project]
            return [self.ids[i] for i in kept[:n]]
        rows = self.of[project] if project else np.arange(len(self.ids))
        sims = self.m[rows] @ q
        return [self.ids[rows[i]] for i in np.argsort(-sims)[:n]]


def union(lexical: list[str], vector: list[str], w: float, k: int = 10) -> list[str]:
    """Reciprocal-rank fusion (k = 60) of two lists: an item found by either counts."""
    sc: dict[str, float] = {}
    for rank, x in enumerate(lexical, 1):
        sc[x] = sc.get(x, 0.0) + 1.0 / (60 + rank)
    for rank, x in enumerate(vector, 1):
        sc[x] = sc.get(x, 0.0) + w / (60 + rank)
    return sorted(sc, key=lambda x: -sc[x])[:k]


def run(store: Store, model: Model, rows: list[dict[str, Any]], depth: int,
        ann: bool) -> None:
    vl = VectorList(store, ann)
    lexical_only = dataclasses.replace(PARAMS, w_vector=0.0, gate_margin=-1.0)
    for r in rows:
        r["qvec"] = model.query(r["q"]["question"])
        ev = r["q"]["evidence"]
        r["by_w"], r["union"], r["deep"] = {}, {}, {}
        for w in WEIGHTS:  # w 0: vectors looked up, not weighed (the gate shut)
            params = dataclasses.replace(PARAMS, w_vector=w,
                                         gate_margin=-1.0 if w == 0 else None)
            got = search(store, r, params, r["qvec"])
            r["by_w"][w] = score([h.record_id for h in got.hits], ev)
            if w == 0:
                r["features"] = {"margin": got.fusion["margin"]}
        r["lexical"] = score([h.record_id for h in search(store, r, PARAMS, None).hits], ev)
        r["shipped"] = score([h.record_id for h in search(store, r, PARAMS, r["qvec"]).hits],
                             ev)
        lex = [h.record_id for h in store.read_sync(lambda c: retrieve_sync(
            c, store.index, r["q"]["question"], k=depth, project=r["project"],
            params=lexical_only)).hits]
        vec = vl.top(r["qvec"], r["project"], depth)
        for w in WEIGHTS:
            r["union"][w] = score(union(lex, vec, w), ev)
        for n, w in itertools.product(DEEP, WEIGHTS[1:]):  # a deeper lexical pool fused
            params = dataclasses.replace(PARAMS, candidates=n, fuse_top=n, w_vector=w,
                                         gate_margin=None)
            r["deep"][(n, w)] = score(
                [h.record_id for h in search(store, r, params, r["qvec"]).hits], ev)
        r["category"] = r["set"]


def _best_w(train: list[dict[str, Any]], key: str) -> float:
    return max(WEIGHTS, key=lambda w: (sum(r[key][w]["R@10"] + r[key][w]["NDCG@10"]
                                           for r in train), -w))


def leave_one_set_out(rows: list[dict[str, Any]]) -> tuple[dict[str, list], list]:
    """Per question (rows' order), each method with what the other sets chose: fusion in
    the candidates at the best weight, the margin gate, the union at the best weight."""
    out: dict[str, dict[str, Any]] = {"plain": {}, "gated": {}, "union": {}}
    chosen = []
    for s in sorted({r["set"] for r in rows}):
        train = [r for r in rows if r["set"] != s]
        w, wu, gate = _best_w(train, "by_w"), _best_w(train, "union"), fit_gate(
            train, ["margin"])
        chosen.append((s, w, gate, wu))
        for r in rows:
            if r["set"] == s:
                q = r["q"]["qid"]
                out["plain"][q] = r["by_w"][w]
                out["gated"][q] = r["by_w"][_gate_w(r, gate)]
                out["union"][q] = r["union"][wu]
    order = [r["q"]["qid"] for r in rows]
    return {k: [v[q] for q in order] for k, v in out.items()}, chosen


def table(name: str, rows: list[dict[str, Any]], cols: list[tuple[str, list]]) -> None:
    print(f"\n{name}: {len(rows)} probes\n")
    print_table(cols, [r["lexical"] for r in rows])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--home", type=Path, default=Path("/tmp/md-eval-para"))
    ap.add_argument("--max-chars", type=int, default=512)
    ap.add_argument("--jobs", type=int, default=2, help="model processes for the first embed")
    ap.add_argument("--depth", type=int, default=30,
                    help="each list's length in the union (the lexical candidates fused: 30)")
    ap.add_argument("--ann", action="store_true",
                    help="the vector list from a usearch index (uv run --with usearch), "
                         "not the exact ranking")
    ap.add_argument("--vectors-from", type=Path, default=None,
                    help="a home whose vectors of the same texts are reused")
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
        model = Model(idle_s=3600)
        run(store, model, rows, args.depth, args.ann)
    finally:
        store.close_sync()
    cv, chosen = leave_one_set_out(rows)
    cols = [("lexical (memoryd today)", [r["lexical"] for r in rows])]
    cols += [(f"fused in the candidates, w {w}", [r["by_w"][w] for r in rows])
             for w in WEIGHTS[1:]]
    cols += [(f"shipped gate (margin < {PARAMS.gate_margin}, w {PARAMS.w_vector})",
              [r["shipped"] for r in rows]),
             ("in the candidates, w chosen on the other sets", cv["plain"]),
             ("margin gate fitted on the other sets", cv["gated"])]
    cols += [(f"union with e5's top {args.depth}, w {w}", [r["union"][w] for r in rows])
             for w in WEIGHTS[1:]]
    cols += [("union, w chosen on the other sets", cv["union"])]
    cols += [(f"fused in the lexical top {n}, w {w}", [r["deep"][(n, w)] for r in rows])
             for n, w in itertools.product(DEEP, WEIGHTS[1:])]
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
              if "chosen" in n or "fitted" in n or n.startswith("lexical")}
        print(f"  {s} ({len(idx)}): " + "; ".join(
            f"{n}: {m['R@10']:.3f} / {m['NDCG@10']:.3f}" for n, m in ms.items()))
    print("\nchosen on the other sets (set left out: w in the candidates; gate; w union):")
    for s, w, g, wu in chosen:
        print(f"  {s}: {w}; {g}; {wu}")
    print(f"\nprobes per set: {dict(Counter(r['set'] for r in rows))}; "
          f"kinds: {dict(Counter(r['kind'] for r in rows))}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
