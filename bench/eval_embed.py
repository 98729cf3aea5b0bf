"""memoryd with and without its vector signal on the shared retrieval benchmark's dev split
(`../shared/eval`, lme-dev: 30 questions, 6 categories of 5), all in one run (issue 31):
lexical, and the union with the units nearest each question by meaning
(`memoryd.recall.union`) at each weight, the weight chosen by leave-one-category-out
cross-validation.

The store is built once by `python -m memoryd` on the sessions (embeddings off, as
`bench/eval_ranker.py` does; `--home` keeps it for the next run), then every embeddable
unit gets its vector, as the worker would store it (`embed_all`: ~13 min on two cores for
the 13.7k units; the home keeps them; `--vectors-from` another home takes its vectors of
the same texts). Questions are searched in-process with `retrieve_sync` (what /v1/search
runs, with its project filter per scope), the nearest units asked of the model's process
as the daemon asks them (`memoryd.embed.VectorQuery`, the same code).

Caveat: memoryd's lexical ranking was tuned on these 30 questions and 26 already have
R@10 = 1, so this split can show a loss but hardly a gain; `eval_embed_paraphrase.py`
measures on probes never used for tuning.

    nice -n 10 .venv/bin/python bench/eval_embed.py --home /tmp/md-eval-embed2
"""

from __future__ import annotations

import argparse
import dataclasses
import random
import statistics
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, "/work/shared")

from bench.eval_ranker import Daemon, _default_sessions  # noqa: E402
from eval import metrics as M  # noqa: E402
from eval.common import load_qrels  # noqa: E402
from memoryd.daemon.store_index import open_store_sync  # noqa: E402
from memoryd.embed import Embedder, VectorQuery  # noqa: E402
from memoryd.embed.model import Model  # noqa: E402
from memoryd.paths import resolve_paths  # noqa: E402
from memoryd.recall.retrieval import PARAMS, retrieve_sync  # noqa: E402
from memoryd.store import Store, vectors  # noqa: E402

WEIGHTS = (0.25, 0.5, 1.0, 2.0)  # the vector list's weight in the union (the lexical's: 1)
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


def embed_all(store: Store, max_chars: int, jobs: int, reuse: Path | None) -> None:
    """Every embeddable unit's vector, as the worker would store it; a unit whose text
    another unit has (haystacks share sessions) is embedded once. `reuse`: another home
    whose vectors were made the same way: a unit with the same text there takes its
    vector (the model is deterministic)."""
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


def search(store: Store, row: dict[str, Any], params: Any, vq: Any) -> Any:
    return store.read_sync(lambda c: retrieve_sync(
        c, store.index, row["q"]["question"], k=K, project=row["project"], params=params,
        vq=vq))


def score(items: list[str], evidence: list[str]) -> dict[str, float]:
    return {"R@1": M.recall_at_k(items, evidence, 1), "R@5": M.recall_at_k(items, evidence, 5),
            "R@10": M.recall_at_k(items, evidence, 10),
            "any@10": M.recall_any_at_k(items, evidence, 10),
            "NDCG@10": M.ndcg_at_k(items, evidence, 10)}


def rank(store: Store, embedder: Embedder, row: dict[str, Any],
         depths: tuple[int, ...] = ()) -> None:
    """`row` scored lexically (`lexical`) and in the union at each weight (`union`[w]),
    and at w 1 with each list's length in `depths` (`depth`[n]); the time of its first
    ask of the model (the query's embedding and the search over the vectors) in
    `nearest_s`."""
    ev = row["q"]["evidence"]
    row["lexical"] = score([h.record_id for h in search(store, row, PARAMS, None).hits], ev)
    vq = VectorQuery(embedder, row["q"]["question"])  # asks the model once, kept
    t0 = time.perf_counter()
    row["union"] = {}
    for w in WEIGHTS:
        got = search(store, row, dataclasses.replace(PARAMS, w_vector=w), vq)
        row["union"][w] = score([h.record_id for h in got.hits], ev)
        if w == WEIGHTS[0]:
            row["nearest_s"] = time.perf_counter() - t0
    row["depth"] = {n: score([h.record_id for h in search(
        store, row, dataclasses.replace(PARAMS, union_depth=n), vq).hits], ev)
        for n in depths}


def best_w(train: list[dict[str, Any]]) -> float:
    """The weight that scores best (R@10 + NDCG@10) on these rows; the smaller wins ties."""
    return max(WEIGHTS, key=lambda w: (sum(r["union"][w]["R@10"] + r["union"][w]["NDCG@10"]
                                           for r in train), -w))


def held_out(rows: list[dict[str, Any]], by: str) -> tuple[list[dict[str, float]], list]:
    """Each row scored at the weight chosen on the rows of the other groups (`by`: the
    key that names a row's group), in the rows' order; and the weight each group got."""
    out: dict[int, dict[str, float]] = {}
    chosen = []
    for g in sorted({r[by] for r in rows}):
        w = best_w([r for r in rows if r[by] != g])
        chosen.append((g, w))
        out.update({i: r["union"][w] for i, r in enumerate(rows) if r[by] == g})
    return [out[i] for i in range(len(rows))], chosen


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
    ap.add_argument("--jobs", type=int, default=2, help="model processes for the first embed")
    ap.add_argument("--vectors-from", type=Path, default=None,
                    help="a home whose vectors of the same texts are reused")
    args = ap.parse_args(argv)
    sessions = (args.sessions or _default_sessions()).resolve()
    qrels = load_qrels(sessions)
    store = build(sessions, args.home.resolve())
    try:
        embed_all(store, args.max_chars, args.jobs, args.vectors_from)
        embedder = Embedder(store, max_chars=args.max_chars, idle_s=3600)
        rows = [{"q": q, "project": str(sessions / q["scope"]), "category": q["category"]}
                for q in qrels]
        for r in rows:
            rank(store, embedder, r)
            print(f"  {r['q']['qid']}: lexical R@10 {r['lexical']['R@10']:.2f}, union(1) "
                  f"{r['union'][1.0]['R@10']:.2f}", file=sys.stderr)
        embedder.model.release()
    finally:
        store.close_sync()
    held, chosen = held_out(rows, "category")
    lexical = [r["lexical"] for r in rows]
    table = [("lexical (memoryd without vectors)", lexical)]
    table += [(f"union, w {w}" + (" (ships)" if w == PARAMS.w_vector else ""),
               [r["union"][w] for r in rows]) for w in WEIGHTS]
    table.append(("union, w chosen on the other categories", held))
    print(f"\n{len(rows)} questions, turn level, k={K}; the last two columns: 95% paired "
          "bootstrap interval of the row minus lexical\n")
    print_table(table, lexical)
    print("\nweights chosen (held-out category: w): "
          + ", ".join(f"{c}: {w}" for c, w in chosen))
    qs = sorted(r["nearest_s"] for r in rows)
    print(f"\nnearest units (query embedding + exact search, the model's process): p50 "
          f"{1000 * statistics.median(qs):.1f} ms, p90 {1000 * qs[int(0.9 * len(qs))]:.1f} "
          f"ms, max {1000 * qs[-1]:.1f} ms ({len(qs)} questions; the first loads the "
          "vectors)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
