"""Local embeddings on a large store (issue 31): query latency over the socket with and
without vectors, the same while the worker embeds in the background, and the model's
embedding throughput.

The store is bench/bigstore.py's (built once, cached; --units, default 100,000), copied
for this run. Every embeddable unit but the newest --pending gets a vector: synthetic
ones (seeded random int8: the exact search's cost does not depend on their values, and
embedding 100k units for real takes ~3 core-hours), written straight into
`unit_vectors`. With embeddings on, every search asks the model's process for the units
nearest the query (its embedding, then an exact search over the newest 100,000 units'
vectors: `memoryd.embed.engine`) and joins them with the keyword ranking. Then, in one
run, the same queries (bench/harness.py's mix, --queries) over the socket:

  off       a daemon with embed.enabled = false
  busy      a daemon with embeddings on while its worker has the --pending newest units
            to embed (real embeddings, in the background): measured from its start. The
            worker embeds only once no query came for 2 s (`embed.worker.QUIET_S`), so
            this is the queries' latency beside a worker that defers to them
  rest      the same daemon once its worker has caught up (the model stays loaded)
  off2      embeddings off again (drift of the machine over the run)

Throughput: --sample unit texts of the store embedded one call each (what the worker
does), units per core-second (the CPU time of the model's process).

`--latency N` measures only the model: its load time and resident memory (RSS before and
after, and after it is let go), and the query embedding's p50/p99 over N of the bench's
queries, as the daemon embeds them (in the model's own process, on one thread: the embedding's
share of what a search with vectors adds; the search over the vectors is the rest), with
the load average beside it; `--load K` runs K busy loops beside it (bench/busy.py).

`--context` times what a hook asks instead of a search: `POST /v1/context` from one of
bigstore's projects with 2,000 tokens (its recall ranks this project, then everyone when
the project has too few hits; both passes share one ask of the model). `--entries N`
gives the home a MEMORY.md of N entries (synthetic sentences, 40-160 characters): with
embeddings on, the worker embeds them before any unit, and each context also asks their
cosines with its query (`memoryd.recall.long_term`; the model embeds the query once for
both asks).

    .venv/bin/python bench/embed.py --units 100000 --queries 200 [--context [--entries 111]]
    .venv/bin/python bench/embed.py --latency 300 [--load 1]
"""

from __future__ import annotations

import argparse
import random
import shutil
import sqlite3
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402

from bench import bigstore  # noqa: E402
from bench import harness as h  # noqa: E402
from memoryd.embed.model import Model  # noqa: E402
from memoryd.paths import resolve_paths  # noqa: E402
from memoryd.store import vectors  # noqa: E402


def fill(db: Path, pending: int, seed: int) -> tuple[int, int]:
    conn = sqlite3.connect(db)
    conn.execute("PRAGMA foreign_keys=ON")
    from memoryd.store.migrations import migrate

    migrate(conn)
    ids = [r[0] for r in conn.execute(
        f"SELECT u.id FROM units u WHERE {vectors.EMBEDDABLE} ORDER BY u.id")]
    keep = ids[:max(0, len(ids) - pending)]
    rng = np.random.default_rng(seed)
    conn.execute("DELETE FROM unit_vectors")
    for i in range(0, len(keep), 10_000):
        part = keep[i:i + 10_000]
        m = rng.integers(-127, 128, size=(len(part), 384), dtype=np.int8)
        conn.executemany("INSERT INTO unit_vectors (unit_id, vec) VALUES (?, ?)",
                         zip(part, (row.tobytes() for row in m)))
    conn.commit()
    conn.close()
    return len(ids), len(keep)


def throughput(db: Path, n: int, max_chars: int = 512) -> dict[str, float]:
    conn = sqlite3.connect(db)
    rows = conn.execute(
        f"SELECT u.kind, substr(u.content, 1, {max_chars}), u.one_liner FROM units u "
        f"WHERE {vectors.EMBEDDABLE} ORDER BY random() LIMIT ?", (n,)).fetchall()
    conn.close()
    texts = [vectors.unit_text(k, c, o, max_chars) for k, c, o in rows]
    m = Model(idle_s=3600)
    t0 = time.perf_counter()
    m.query("warm up")
    load_s = time.perf_counter() - t0
    c0, w0 = h.model_cpu_s(m), time.perf_counter()
    for t in texts:
        m.passages([t])
    cpu, wall = h.model_cpu_s(m) - c0, time.perf_counter() - w0
    qs = []
    for t in texts[:50]:
        q0 = time.perf_counter()
        m.query(t[:80])
        qs.append(time.perf_counter() - q0)
    return {"texts": len(texts), "mean_chars": statistics.fmean(len(t) for t in texts),
            "units_per_core_s": len(texts) / cpu, "units_per_s_wall": len(texts) / wall,
            "load_s": load_s, "query_embed_p50_ms": 1000 * statistics.median(qs)}


def measure(client, queries, label: str, out: dict[str, list[float]],
            context: bool = False) -> None:
    """Each query's time over the socket: a search, or with `context` what a hook asks
    (`POST /v1/context` from one of bigstore's projects, 2,000 tokens, as
    context_latency.py asks it)."""
    for i, (_cls, q, mode) in enumerate(queries):
        t0 = time.perf_counter()
        if context:
            client.request("POST", "/v1/context", {"query": q, "budget_tokens": 2000,
                                                   "cwd": f"/bench/proj{i % 37:02d}"})
        else:
            client.search(query=q, mode=mode)
        out[label].append(time.perf_counter() - t0)


def pct(xs: list[float], p: float) -> float:
    xs = sorted(xs)
    return 1000 * xs[min(len(xs) - 1, int(p * len(xs)))]


def _rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def latency(n: int, seed: int, load: int) -> int:
    import contextlib
    import gc
    import os

    from bench.busy import BusyLoad

    queries = [q for _c, q, _m in h.TextGen(seed).queries(random.Random(seed), n)]
    rss0 = _rss_mb()
    m = Model(idle_s=3600)
    t0 = time.perf_counter()
    m.query("warm up")
    load_s = time.perf_counter() - t0
    rss1 = _rss_mb()
    times: list[float] = []
    with BusyLoad(load) if load else contextlib.nullcontext() as busy:
        for q in queries:
            t0 = time.perf_counter()
            m.query(q)
            times.append(time.perf_counter() - t0)
    rss2 = _rss_mb()
    m.release()
    gc.collect()
    print(f"model load + first query {load_s:.2f} s; RSS {rss0:.0f} MB before, {rss1:.0f} "
          f"loaded, {rss2:.0f} after {n} queries, {_rss_mb():.0f} released (this process: "
          "the model runs in its own)")
    print(f"query embedding (its process and the round trip to it), n={n}: p50 "
          f"{pct(times, .5):.1f} ms, p99 {pct(times, .99):.1f} ms")
    print(f"load average {os.getloadavg()}" + (f"; {busy.report()}" if load else ""))
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--latency", type=int, default=0)
    ap.add_argument("--load", type=int, default=0,
                    help="with --latency: busy-looping processes beside it (bench/busy.py)")
    ap.add_argument("--units", type=int, default=100_000)
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--pending", type=int, default=40)
    ap.add_argument("--sample", type=int, default=60)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--context", action="store_true",
                    help="time context requests (what a hook asks) instead of searches")
    ap.add_argument("--entries", type=int, default=0,
                    help="MEMORY.md entries in the home (synthetic)")
    args = ap.parse_args(argv)
    if args.latency:
        return latency(args.latency, args.seed, args.load)
    dir = bigstore.store_dir(args.units, args.seed)
    if not (dir / "meta.json").exists():
        bigstore.main(["--units", str(args.units)])
    run_home = dir / "embed-run-home"
    shutil.rmtree(run_home, ignore_errors=True)
    paths = resolve_paths(run_home)
    paths.ensure()
    built = resolve_paths(dir / "home")
    shutil.copyfile(built.db, paths.db)
    shutil.copytree(built.data_dir / "index", paths.data_dir / "index")
    total, kept = fill(paths.db, args.pending, args.seed)
    print(f"{args.units:,} units, {total:,} embeddable, {kept:,} given vectors, "
          f"{total - kept} left to the worker")
    if args.sample:
        tp = throughput(paths.db, args.sample)
        print("throughput:", {k: round(v, 2) for k, v in tp.items()})
    queries = h.TextGen(args.seed).queries(random.Random(args.seed * 101), args.queries)
    if args.entries:
        rng, gen = random.Random(args.seed * 7), h.TextGen(args.seed)
        paths.memory_dir.mkdir(parents=True, exist_ok=True)
        (paths.memory_dir / "MEMORY.md").write_text("".join(
            f"2026-{1 + i % 12:02d}-{1 + i % 28:02d}|manual|"
            f"{gen.english(rng, rng.randint(40, 160)).replace('|', ' ')}\n"
            for i in range(args.entries)))
    times: dict[str, list[float]] = {k: [] for k in ("off", "busy", "rest", "off2")}
    src = dir / "empty-src"
    src.mkdir(exist_ok=True)
    base = {"MEMORYD_AUTO_SUMMARY": "0"}
    for label, on in (("off", False), ("busy", True), ("off2", False)):
        with h.short_dir() as sd:
            env = {**base, "MEMORYD_EMBED__ENABLED": "true" if on else "false"}
            d = h.Memoryd(run_home, src, sd / "m.sock", log_path=dir / "embed.log", env=env)
            try:
                d.wait_ready(300)
                d.wait_caught_up(300)
                c = d.client
                measure(c, queries[:10], "warm", {"warm": []}, args.context)
                t0 = time.perf_counter()
                measure(c, queries, label, times, args.context)
                if on:
                    st = c.status()["embed"]
                    print(f"busy pass: {time.perf_counter() - t0:.1f} s, embed {st}")
                    while not c.status()["embed"]["caught_up"]:
                        time.sleep(1)
                    st = c.status()["embed"]
                    print(f"worker caught up: {st}")
                    measure(c, queries, "rest", times, args.context)
            finally:
                d.stop()
    for k, xs in times.items():
        print(f"  {k:5} n={len(xs)} p50 {pct(xs, .5):6.1f} ms  p99 {pct(xs, .99):6.1f} ms")
    off = statistics.median(times["off"] + times["off2"])
    rest, busy = statistics.median(times["rest"]), statistics.median(times["busy"])
    print(f"p50 rest - off: {1000 * (rest - off):+.1f} ms; busy/rest p50: {busy / rest:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
