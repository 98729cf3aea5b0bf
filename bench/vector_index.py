"""What a vector index over the store would cost (issue 31: the union with e5's ranking over
the whole store is where vectors pay, `eval_embed_paraphrase.py`; re-ordering the lexical
candidates does not). Not part of memoryd: a measurement for the design of that step.

usearch (Apache-2.0, a 2.3 MB wheel, HNSW over int8 vectors) is built over a store's
`unit_vectors` on one thread (background work gets one core), saved, then searched for
the top 30 in a fresh process, loaded and memory-mapped (`view`): build time and CPU,
file size, query latency, resident memory, and recall@30 against the exact ranking
(numpy, brute force, same run: the raw baseline). Queries are stored vectors with noise
(a query near some unit, as a real one is).

    uv run --group test --with usearch==2.26.6 python -u bench/vector_index.py \\
        --store HOME [--limit N]

Real vectors: an `eval_embed_paraphrase.py` home (15.6k). The large stores' vectors are
bench/embed.py's synthetic ones (seeded random int8): no neighbourhoods, the worst case
for a graph index (slow to build, and its recall there says nothing of real text), so
they give an upper bound on build time only (`--store bench/out/idle-embed-1m/home
--limit 100000`; all 990k did not finish in 20 minutes on one thread).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np


DIM, K = 384, 30


def load(db: Path, limit: int | None) -> tuple[np.ndarray, np.ndarray]:
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    sql = "SELECT unit_id, vec FROM unit_vectors" + (f" LIMIT {limit}" if limit else "")
    ids, blobs = [], []
    for uid, vec in conn.execute(sql):
        ids.append(uid)
        blobs.append(vec)
    conn.close()
    m = np.frombuffer(b"".join(blobs), dtype=np.int8).reshape(len(ids), DIM)
    return np.asarray(ids, dtype=np.uint64), m


def queries(m: np.ndarray, n: int, seed: int = 7) -> np.ndarray:
    rng = np.random.default_rng(seed)
    base = m[rng.integers(0, len(m), n)].astype(np.float32)
    base /= np.maximum(np.linalg.norm(base, axis=1, keepdims=True), 1.0)
    q = base + rng.normal(0, 0.03, base.shape).astype(np.float32)
    return q / np.linalg.norm(q, axis=1, keepdims=True)


def exact(m: np.ndarray, ids: np.ndarray, q: np.ndarray) -> list[set[int]]:
    out = []
    for lo in range(0, len(q), 16):
        sims = np.zeros((min(16, len(q) - lo), len(m)), dtype=np.float32)
        for a in range(0, len(m), 100_000):  # int8 -> float32 a slice at a time
            part = m[a:a + 100_000].astype(np.float32)
            part /= np.maximum(np.linalg.norm(part, axis=1, keepdims=True), 1.0)
            sims[:, a:a + 100_000] = q[lo:lo + 16] @ part.T
        for row in sims:
            out.append({int(x) for x in ids[np.argpartition(-row, K)[:K]]})
    return out


def rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def child(path: str, qfile: str, view: bool) -> None:
    """In a fresh process: open the saved index, search every query, report."""
    from usearch.index import Index

    q = np.load(qfile)
    before = rss_mb()
    t0 = time.perf_counter()
    index = Index.restore(path, view=view)
    opened = time.perf_counter() - t0
    lat, found = [], []
    for v in q:
        t0 = time.perf_counter()
        got = index.search(v, K, threads=1)
        lat.append(time.perf_counter() - t0)
        found.append([int(x) for x in got.keys])
    lat.sort()
    print(json.dumps({"open_s": opened, "p50_ms": 1000 * statistics.median(lat),
                      "p99_ms": 1000 * lat[int(0.99 * len(lat)) - 1],
                      "rss_mb": rss_mb(), "rss_before_mb": before, "found": found}))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--store", type=Path, required=True, help="a memoryd home")
    ap.add_argument("--limit", type=int, default=None, help="the first N vectors only")
    ap.add_argument("--queries", type=int, default=300)
    ap.add_argument("--child", nargs=3, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        child(args.child[0], args.child[1], args.child[2] == "view")
        return 0
    from usearch.index import Index

    db = args.store / "data" / "memoryd.db"
    if not db.exists():
        db = args.store / "memoryd" / "data" / "memoryd.db"
    ids, m = load(db, args.limit)
    print(f"{len(ids):,} vectors from {db}")
    index = Index(ndim=DIM, metric="cos", dtype="i8")
    t0, c0 = time.perf_counter(), time.process_time()
    for a in range(0, len(ids), 50_000):
        index.add(ids[a:a + 50_000], m[a:a + 50_000], threads=1)
    build, cpu = time.perf_counter() - t0, time.process_time() - c0
    print(f"build, one thread: {build:.1f} s wall, {cpu:.1f} s CPU "
          f"({len(ids) / cpu:,.0f} vectors per core-second); builder RSS "
          f"{resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MB peak")
    with tempfile.TemporaryDirectory(dir=args.store) as tmp:
        path = os.path.join(tmp, "vectors.usearch")
        index.save(path)
        del index
        print(f"file: {os.path.getsize(path) / 1e6:.1f} MB "
              f"({os.path.getsize(path) / len(ids):.0f} bytes a vector; the vectors alone "
              f"{DIM} bytes)")
        q = queries(m, args.queries)
        qfile = os.path.join(tmp, "q.npy")
        np.save(qfile, q)
        t0 = time.perf_counter()
        truth = exact(m, ids, q[:100])
        brute = (time.perf_counter() - t0) / 100
        print(f"exact top {K} (numpy, all vectors, the baseline): {1000 * brute:.0f} ms a "
              "query")
        for mode in ("load", "view"):
            out = subprocess.run([sys.executable, __file__, "--store", str(args.store),
                                  "--child", path, qfile, mode], capture_output=True,
                                 text=True, check=True)
            r = json.loads(out.stdout)
            rec = statistics.fmean(len(truth[i] & set(r["found"][i])) / K
                                   for i in range(len(truth)))
            print(f"{mode}: opened in {r['open_s']:.2f} s; top {K} p50 {r['p50_ms']:.2f} ms, "
                  f"p99 {r['p99_ms']:.2f} ms ({brute * 1000 / r['p50_ms']:.0f}x faster than "
                  f"exact); RSS {r['rss_before_mb']:.0f} -> {r['rss_mb']:.0f} MB after "
                  f"{len(q)} queries; recall@{K} against exact {rec:.3f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
