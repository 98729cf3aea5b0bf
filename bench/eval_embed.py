"""memoryd with and without its vector signal on the shared retrieval benchmark's dev split
(`../shared/eval`, lme-dev: 30 questions, 6 categories of 5), all in one run (issue 31):
lexical, plain fusion, and fusion gated by the lexical ranking itself, the gate fitted by
leave-one-category-out cross-validation.

The store is built once by `python -m memoryd` on the sessions (embeddings off, as
`bench/eval_ranker.py` does; `--home` keeps it for the next run), then opened here and
searched in-process with `retrieve_sync` (what /v1/search runs, with its project filter
per scope). Before a question is searched with vectors, the lexical candidates its fusion
looks at (its best `fuse_top`) are embedded with the daemon's model where no vector is
stored yet: the vectors the background worker would have stored, for a fraction of the
corpus. Embedding throughput is reported from those calls (units per core-second), and
the query embedding's latency from the questions (one thread, as the daemon does).

Each question is ranked lexically, fused at every vector weight in `WEIGHTS` (plain
fusion), and with the gate closed (the vectors looked up, weight 0: the shipped path when
the gate says no), which also gives the lexical top ten's margin the shipped gate reads
(`memoryd.recall.fusion.lexical_margin`). The gate that ships is "fuse with weight w when
the margin is below t": for each category held out, (t, w) is the pair that scores best
(R@10 + NDCG@10, then fewer questions fused) on the other five categories, and the
held-out five are then ranked by `retrieve_sync` with those parameters (the code that
ships, not a table look-up). The pooled held-out figures are the gated row: no figure
there was tuned on its own questions. An exploratory row fits the same way over more
features of the lexical ranking (`memoryd.recall.fusion.gate_features`: term coverage of
the top hits, score gaps), to say whether another gate would have done better.

    nice -n 10 .venv/bin/python bench/eval_embed.py --home /tmp/md-eval-embed2
"""

from __future__ import annotations

import argparse
import dataclasses
import itertools
import random
import statistics
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, "/work/shared")

from bench import harness as h  # noqa: E402
from bench.eval_ranker import Daemon, _default_sessions  # noqa: E402
from eval import metrics as M  # noqa: E402
from eval.common import load_qrels  # noqa: E402
from memoryd.daemon.store_index import open_store_sync  # noqa: E402
from memoryd.embed.model import Model  # noqa: E402
from memoryd.index.query import Filters  # noqa: E402
from memoryd.paths import resolve_paths  # noqa: E402
from memoryd.recall.fusion import gate_features  # noqa: E402
from memoryd.recall.retrieval import PARAMS, _score, plan_query, retrieve_sync  # noqa: E402
from memoryd.store import Store, vectors  # noqa: E402

WEIGHTS = (0.0, 0.25, 0.5, 1.0, 2.0)
K = 10
METRICS = ("R@1", "R@5", "R@10", "any@10", "NDCG@10")


def build(sessions: Path, home: Path) -> Store:
    import os

    os.environ["MEMORYD_EMBED__ENABLED"] = "false"  # this bench embeds what it needs
    d = Daemon(sessions, home, None)
    t0 = time.monotonic()
    st = d.wait_caught_up(1800)
    print(f"[memoryd] caught up: {st['units']} units in {time.monotonic() - t0:.1f}s",
          file=sys.stderr)
    d.close()
    return open_store_sync(resolve_paths(home).db)


class Vectors:
    """Embeds a question's fusion candidates on demand; counts the cost."""

    def __init__(self, store: Store, model: Model, max_chars: int = 512) -> None:
        self.store, self.model, self.max_chars = store, model, max_chars
        self.cpu = 0.0
        self.n = 0

    def ensure(self, query: str, project: str) -> None:
        plan = plan_query(query)
        if plan.match is None:
            return
        p, cut, index = PARAMS, self.max_chars, self.store.index

        def todo(c: Any) -> list[tuple[int, str]]:
            limit = max(min(p.max_candidates, max(p.candidates, p.candidates_per_hit * K)),
                        p.fuse_top)
            got = index.ranked(c, plan.terms, Filters(project=project), mode="or",
                               limit=limit, count=False, w_body=p.w_body,
                               w_one_liner=p.w_one_liner, speaker=plan.speaker is not None)
            cands = got[1] if got else []
            _score(cands, plan, time.time(), None, p)
            ids = [x["unit_id"] for x in sorted(cands, key=lambda x: -x["score"])[:p.fuse_top]]
            have = vectors.vectors_of(c, ids)
            rows = c.execute(
                f"SELECT id, kind, substr(content, 1, {cut}), one_liner FROM units u "
                f"WHERE id IN ({','.join('?' * len(ids))}) AND {vectors.EMBEDDABLE}",
                ids).fetchall() if ids else []
            return [(r[0], vectors.unit_text(r[1], r[2], r[3], cut)) for r in rows
                    if r[0] not in have]

        items = self.store.read_sync(todo)
        if not items:
            return
        if self.model.pid is None:  # the model's process runs: its CPU is what is counted
            self.model.query("start")
        t0 = h.model_cpu_s(self.model)
        vecs = self.model.passages([t for _, t in items])
        self.cpu += h.model_cpu_s(self.model) - t0
        self.n += len(items)
        self.store.write_sync(lambda c: vectors.save(c, zip([i for i, _ in items], vecs)))


def search(store: Store, row: dict[str, Any], params: Any, qvec: Any) -> Any:
    return store.read_sync(lambda c: retrieve_sync(
        c, store.index, row["q"]["question"], k=K, project=row["project"], params=params,
        qvec=qvec))


def score(items: list[str], evidence: list[str]) -> dict[str, float]:
    return {"R@1": M.recall_at_k(items, evidence, 1), "R@5": M.recall_at_k(items, evidence, 5),
            "R@10": M.recall_at_k(items, evidence, 10),
            "any@10": M.recall_any_at_k(items, evidence, 10),
            "NDCG@10": M.ndcg_at_k(items, evidence, 10)}


def run_questions(store: Store, model: Model, sessions: Path, qrels: list[dict],
                  max_chars: int) -> tuple[list[dict[str, Any]], Vectors, list[float]]:
    vec = Vectors(store, model, max_chars)
    rows, qlat = [], []
    for q in qrels:
        project = str(sessions / q["scope"])
        vec.ensure(q["question"], project)
        t0 = time.perf_counter()
        qvec = model.query(q["question"])
        qlat.append(time.perf_counter() - t0)
        row: dict[str, Any] = {"q": q, "project": project, "qvec": qvec,
                               "category": q["category"], "by_w": {}}
        for w in WEIGHTS:
            # w 0: the gate closed (vectors looked up, not weighed); else plain fusion
            params = dataclasses.replace(PARAMS, w_vector=w, gate_margin=-1.0 if w == 0
                                         else None)
            r = search(store, row, params, qvec)
            row["by_w"][w] = score([h.record_id for h in r.hits], q["evidence"])
            if w == 0:
                margin = r.fusion["margin"]
        r = search(store, row, PARAMS, None)
        row["lexical"] = score([h.record_id for h in r.hits], q["evidence"])
        row["features"] = {**gate_features(r.plan.terms, r.hits), "margin": margin}
        rows.append(row)
        print(f"  {q['qid']}: lexical R@10 {row['by_w'][0.0]['R@10']:.2f}, fused(1) "
              f"{row['by_w'][1.0]['R@10']:.2f}; {row['features']}", file=sys.stderr)
    return rows, vec, qlat


# -- the gate, fitted by category ------------------------------------------------------

def _gate_w(row: dict[str, Any], gate: tuple[str, float, str, float] | None) -> float:
    if gate is None:
        return 0.0
    f, t, side, w = gate
    x = row["features"][f]
    return w if (x < t if side == "below" else x > t) else 0.0


def _objective(rows: list[dict[str, Any]], gate: tuple[str, float, str, float] | None
               ) -> tuple[float, int]:
    tot, fused = 0.0, 0
    for r in rows:
        w = _gate_w(r, gate)
        fused += w > 0
        m = r["by_w"][w]
        tot += m["R@10"] + m["NDCG@10"]
    return tot, -fused  # ties: fuse fewer questions


def fit_gate(rows: list[dict[str, Any]], features: list[str] | None = None
             ) -> tuple[str, float, str, float] | None:
    """The best gate on these questions; None (lexical alone) wins ties."""
    best: tuple[str, float, str, float] | None = None
    best_obj = _objective(rows, None)
    for f in features or sorted(rows[0]["features"]):
        xs = sorted({r["features"][f] for r in rows})
        cuts = [(a + b) / 2 for a, b in zip(xs, xs[1:])] + [xs[-1] + 1e-9]
        sides = ("below",) if features == ["margin"] else ("below", "above")
        for t, side, w in itertools.product(cuts, sides, WEIGHTS[1:]):
            g = (f, round(t, 6), side, w)
            obj = _objective(rows, g)
            if obj > best_obj:
                best, best_obj = g, obj
    return best


def cross_validate(store: Store, rows: list[dict[str, Any]], features: list[str] | None
                   ) -> tuple[list[dict[str, float]], list[Any]]:
    """Held-out figures, one per question in `rows`' order; with `features` ["margin"],
    the held-out questions are ranked by the shipped code with the fold's (threshold,
    weight)."""
    held: dict[str, dict[str, float]] = {}
    chosen = []
    for cat in sorted({r["category"] for r in rows}):
        train = [r for r in rows if r["category"] != cat]
        gate = fit_gate(train, features)
        chosen.append((cat, gate))
        for r in rows:
            if r["category"] != cat:
                continue
            qid = r["q"]["qid"]
            if features != ["margin"]:
                held[qid] = r["by_w"][_gate_w(r, gate)]
                continue
            params = dataclasses.replace(PARAMS, w_vector=gate[3] if gate else 0.0,
                                         gate_margin=gate[1] if gate else -1.0)
            got = search(store, r, params, r["qvec"])
            m = score([h.record_id for h in got.hits], r["q"]["evidence"])
            assert m == r["by_w"][_gate_w(r, gate)], (qid, gate)  # same path
            held[qid] = m
    return [held[r["q"]["qid"]] for r in rows], chosen


def mean(ms: list[dict[str, float]]) -> dict[str, float]:
    return {k: statistics.fmean(m[k] for m in ms) for k in METRICS}


def print_table(rows: list[tuple[str, list[dict[str, float]]]],
                lexical: list[dict[str, float]]) -> None:
    """Each row's means, and its 95% paired interval against lexical, as markdown."""
    print("| ranker | " + " | ".join(METRICS) + " | ΔR@10 | ΔNDCG@10 |")
    print("|---|" + "---|" * (len(METRICS) + 2))
    for name, ms in rows:
        m = mean(ms)
        cis = [paired_ci(lexical, ms, key) for key in ("R@10", "NDCG@10")]
        print(f"| {name} | " + " | ".join(f"{m[k]:.3f}" for k in METRICS) + " | "
              + " | ".join(f"{lo:+.3f} to {hi:+.3f}" for lo, hi in cis) + " |")


def paired_ci(base: list[dict[str, float]], other: list[dict[str, float]], key: str,
              n: int = 10_000) -> tuple[float, float]:
    """95% interval of mean(other - base) over questions drawn with replacement (paired
    bootstrap, seeded): what this many questions can tell apart."""
    d = [o[key] - b[key] for b, o in zip(base, other)]
    rng = random.Random(0)
    means = sorted(statistics.fmean(rng.choices(d, k=len(d))) for _ in range(n))
    return means[int(0.025 * n)], means[int(0.975 * n) - 1]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sessions", type=Path, default=None)
    ap.add_argument("--home", type=Path, default=Path("/tmp/md-eval-embed2"))
    ap.add_argument("--max-chars", type=int, default=512,
                    help="a turn is embedded cut to this (embed.max_chars; a home keeps "
                         "the vectors of its first run)")
    args = ap.parse_args(argv)
    sessions = (args.sessions or _default_sessions()).resolve()
    qrels = load_qrels(sessions)
    store = build(sessions, args.home.resolve())
    model = Model(idle_s=3600)
    t0 = time.perf_counter()
    model.query("warm up")
    print(f"model load + first query: {time.perf_counter() - t0:.2f} s")
    try:
        rows, vec, qlat = run_questions(store, model, sessions, qrels, args.max_chars)
        held, chosen = cross_validate(store, rows, ["margin"])
        held_any, chosen_any = cross_validate(store, rows, None)
        shipped = [search(store, r, PARAMS, r["qvec"]) for r in rows]
    finally:
        store.close_sync()
    lexical = [r["lexical"] for r in rows]
    table = [("lexical (memoryd today)", lexical)]
    table += [(f"fused, RRF k=60, w_vector {w}", [r["by_w"][w] for r in rows])
              for w in WEIGHTS[1:]]
    table.append(("gated by margin, held out by category", held))
    table.append(("gated, any feature (exploratory), held out", held_any))
    table.append((f"shipped gate (margin < {PARAMS.gate_margin}, w {PARAMS.w_vector}; "
                  "fitted on all 30: not held out)",
                  [score([h.record_id for h in g.hits], r["q"]["evidence"])
                   for g, r in zip(shipped, rows)]))
    print(f"\n{len(rows)} questions, turn level, k={K}; the last two columns: 95% paired "
          "bootstrap interval of the row minus lexical\n")
    print_table(table, lexical)
    print("\ngates chosen (held-out category: feature, threshold, side, weight):")
    for (cat, g), (_, ga) in zip(chosen, chosen_any):
        print(f"  {cat}: margin {g}; any feature {ga}")
    print(f"  all 30 (the shipped default is fitted here): {fit_gate(rows, ['margin'])}; "
          f"any feature {fit_gate(rows)}")
    fused_n = sum(g.fusion.get("w_vector", 0) > 0 for g in shipped)
    print(f"  the shipped gate fuses {fused_n} of {len(rows)} questions")
    qs = sorted(qlat)
    print(f"\nquery embedding, one thread: p50 {1000 * statistics.median(qs):.1f} ms, "
          f"p90 {1000 * qs[int(0.9 * len(qs))]:.1f} ms, max {1000 * qs[-1]:.1f} ms "
          f"({len(qs)} questions)")
    if vec.n:
        print(f"passages: {vec.n} units embedded in {vec.cpu:.1f} CPU s: "
              f"{vec.n / vec.cpu:.2f} units per core-second")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
