"""Search latency on a large store: memoryd (in-process and over its Unix socket) vs a bare
tantivy index over the same texts, and vs `rg -i -F` over the same transcripts.

The store is built once by bench/bigstore.py (memoryd's own code: generic adapter ->
session_pk + the ingestor's batched SessionWriter; no redaction pass; memoryd's index
built with its writer's documents) and cached under OUT/search-g<gen>-<units>-s<seed>/,
keyed by size and seed, so reruns skip the build; when the index's SCHEMA_VERSION
changed, only memoryd's index is rebuilt (by memoryd's own writer). Each run works on a
fresh copy of the cached database and index (the daemon may write to them). The raw
baselines: a bare tantivy searcher over a copy of the same index segments (memoryd's
schema and analyzer, same index text: CJK runs as bigrams), queried with the same query
memoryd builds, top 15, unit ids read, no filters, no reranking; and the transcripts as
JSONL files for rg.

Measured per query in a balanced rotating order, each query first run once untimed by raw
and inproc so every side finds its pages in the OS cache (--cold skips that):
  raw      bare tantivy: the query memoryd builds, top 15 (this process)
  inproc   memoryd.recall.search.search(store, SearchRequest(...)) in this process
  socket   POST /v1/search to a memoryd subprocess serving the same database (MemorydClient;
           automatic summaries off unless --with-summaries)
  rg       `rg -i -F -c -e WORD ...` over the transcripts (a subprocess; --no-rg skips it)

    .venv/bin/python bench/search.py               # 1,000,000 units (first run builds)
    .venv/bin/python bench/search.py --quick       # 100,000 units
    .venv/bin/python bench/search.py --units 300000 --queries 400 --repeat 3
"""

from __future__ import annotations

import argparse
import asyncio
import random
import shutil
import statistics
import subprocess
import sys
import time
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import harness as h  # noqa: E402
from bigstore import bare_tantivy, build, store_dir  # noqa: E402,F401  (context_latency)
from busy import BusyLoad  # noqa: E402

from memoryd.api import SearchRequest  # noqa: E402
from memoryd.index.query import text_query  # noqa: E402
from memoryd.index.schema import build_analyzer, build_schema  # noqa: E402
from memoryd.paths import resolve_paths  # noqa: E402
from memoryd.recall.retrieval import plan_query  # noqa: E402
from memoryd.recall.search import search  # noqa: E402
from memoryd.daemon.store_index import open_store  # noqa: E402

IMPLS = ("raw", "inproc", "socket", "rg")
RG = shutil.which("rg")


_BARE: list = []  # schema, analyzer


def do_bare(idx, q: str, mode: str) -> int:
    """The bare-tantivy baseline: the query memoryd builds, top 15, unit ids read."""
    s = idx.searcher()
    if not _BARE:
        _BARE.extend((build_schema(), build_analyzer()))
    query = text_query(_BARE[0], _BARE[1], s, plan_query(q, mode).terms, mode)
    if query is None:
        return 0
    hits = s.search(query, 15, count=False).hits
    return len(s.fast_field_values("unit_id", [a for _, a in hits]))


def memoryd_match(q: str, mode: str) -> str | None:
    return plan_query(q, mode).match


def group(cls: str) -> str:
    """Query class for the breakdown: en-or-<k>w, en-and, zh."""
    return "en-and" if "-and-" in cls else cls


async def run(args: argparse.Namespace, dir: Path, info: dict) -> None:
    gen = h.TextGen(args.seed)
    queries = gen.queries(random.Random(args.seed * 101), args.queries)
    # a fresh copy of the built database for this run: memoryd may migrate or write to it
    run_home = dir / "run-home"
    shutil.rmtree(run_home, ignore_errors=True)
    paths = resolve_paths(run_home)
    paths.ensure()
    t0 = time.perf_counter()
    built = resolve_paths(dir / "home")
    shutil.copyfile(built.db, paths.db)
    shutil.copytree(built.data_dir / "index", paths.data_dir / "index")
    print(f"copied the built database for this run in {time.perf_counter() - t0:.1f} s")
    store = await open_store(paths.db)
    raw_ix = bare_tantivy(dir / "raw-tantivy", create=False)
    src = dir / "empty-src"
    src.mkdir(exist_ok=True)
    times: dict[str, list[float]] = defaultdict(list)
    by_class: dict[tuple[str, str], list[float]] = defaultdict(list)
    totals: dict[str, list[int]] = defaultdict(list)
    cpu_s: dict[str, list[float]] = defaultdict(list)
    with h.short_dir() as sd:
        # the copied store's sessions are all idle and unsummarized: with automatic
        # summaries on, the daemon works through that backlog while it is measured
        env = {} if args.with_summaries else {"MEMORYD_AUTO_SUMMARY": "0"}
        d = h.Memoryd(run_home, src, sd / "m.sock", log_path=dir / "memoryd.log", env=env)
        try:
            d.wait_ready(300)  # a busy machine: imports alone can take tens of seconds
            d.wait_caught_up(300)
            client = d.client

            def do_raw(q: str, mode: str, match: str) -> int:
                return do_bare(raw_ix, q, mode)

            def do_rg(q: str, mode: str, match: str) -> int:
                pats = [x for t in plan_query(q, mode).terms for x in ("-e", t)]
                r = subprocess.run([RG, "-i", "-F", "-c", *pats, str(dir / "src")],
                                   capture_output=True, text=True)
                return len(r.stdout.splitlines())

            async def do_inproc(q: str, mode: str, match: str) -> int:
                return (await search(store, SearchRequest(query=q, mode=mode))).total

            def do_socket(q: str, mode: str, match: str) -> int:
                return client.search(query=q, mode=mode)["total"]

            impls = [("raw", do_raw), ("inproc", do_inproc), ("socket", do_socket)]
            if RG and not args.no_rg:
                impls.append(("rg", do_rg))
            # every impl precedes every other equally often: the rotations and their
            # reversals
            idx = list(range(len(impls)))
            orders = [idx[k:] + idx[:k] for k in idx]
            orders += [o[::-1] for o in orders]
            warm = [x for x in impls if x[0] in ("raw", "inproc")]

            pid = d.proc.pid

            async def call(fn, q: str, mode: str, match: str, name: str = ""
                           ) -> tuple[float, int]:
                # CPU: the daemon's (all its threads) for a socket search, this thread's
                # for bare tantivy, this process's (the loop and the store's threads)
                # in process: a figure the machine's load does not stretch
                cpu = (lambda: h.proc_cpu_s(pid)) if name == "socket" else \
                    time.thread_time if name == "raw" else time.process_time
                c0, t0 = cpu(), time.perf_counter()
                r = fn(q, mode, match)
                if asyncio.iscoroutine(r):
                    r = await r
                dt = time.perf_counter() - t0
                if name in ("raw", "inproc", "socket"):
                    cpu_s[name].append(cpu() - c0)
                return dt, r

            with BusyLoad(args.load) as load:  # the fixed background load, if any
                t_start = time.perf_counter()
                for rep in range(args.repeat):
                    for i, (cls, q, mode) in enumerate(queries):
                        match = memoryd_match(q, mode)
                        if match is None:
                            continue
                        if not args.cold:  # the query's pages into the OS and SQLite caches
                            for _, fn in warm:
                                await call(fn, q, mode, match)
                        for j in orders[(i + 3 * rep) % len(orders)]:
                            name, fn = impls[j]
                            dt, r = await call(fn, q, mode, match, name)
                            times[name].append(dt)
                            by_class[(name, group(cls))].append(dt)
                            if name == "inproc":
                                totals[group(cls)].append(r)
                elapsed = time.perf_counter() - t_start
        finally:
            d.stop()
            await store.close()
            if not args.keep:
                shutil.rmtree(run_home, ignore_errors=True)

    names = {"raw": "raw: bare tantivy, same query, top 15",
             "inproc": "memoryd in-process: search.search()",
             "socket": "memoryd over the Unix socket",
             "rg": "rg -i -F -c over the transcripts"}
    impl_names = [n for n in IMPLS if times[n]]
    print()
    print(f"{len(queries)} queries x {args.repeat} timed pass(es), "
          f"{'cold' if args.cold else 'each warmed once first'}, on {info['units']:,} units "
          f"(memoryd data {info['memoryd_db_mb']} MB of which index "
          f"{info.get('memoryd_index_mb')} MB, bare tantivy {info['raw_db_mb']} MB, "
          f"transcripts {info.get('transcripts_mb')} MB); "
          f"{elapsed:.0f} s")
    print(load.report())
    rows = []
    raw_s = h.summary(times["raw"])
    for name in impl_names:
        s = h.summary(times[name])
        rows.append([names[name], f"{s['p50'] * 1000:.2f}", f"{s['p90'] * 1000:.2f}",
                     f"{s['p99'] * 1000:.2f}", f"{s['max'] * 1000:.1f}",
                     "" if name == "raw" else h.ratio(s["p50"], raw_s["p50"]),
                     "" if name == "raw" else h.ratio(s["p99"], raw_s["p99"])])
    print(h.table(rows, ["search latency (ms)", "p50", "p90", "p99", "max", "p50 ratio",
                         "p99 ratio"]))
    print("(ratios against the first row, the baseline as specified)")
    raw_cpu = statistics.fmean(cpu_s["raw"])
    print("CPU per search, mean ms (bare tantivy: its thread; in process: the whole bench "
          "process; over the socket: the daemon, all threads): " + ", ".join(
              f"{n} {statistics.fmean(cpu_s[n]) * 1000:.2f}"
              + ("" if n == "raw" else f" ({h.ratio(statistics.fmean(cpu_s[n]), raw_cpu)})")
              for n in ("raw", "inproc", "socket")))
    if times["rg"]:
        rg, sock = h.summary(times["rg"]), h.summary(times["socket"])
        print(f"rg / memoryd over the socket: p50 {h.ratio(rg['p50'], sock['p50'])}")
    print()
    classes = sorted({c for _, c in by_class})
    rows = []
    for c in classes:
        n = len(by_class[("raw", c)])
        cells = [f"{statistics.median(by_class[(m, c)]) * 1000:.2f}"
                 for m in impl_names]
        rows.append([c, str(n), f"{statistics.median(totals[c]):,.0f}",
                     *cells, h.ratio(statistics.median(by_class[("socket", c)]),
                                     statistics.median(by_class[("raw", c)]))])
    print(h.table(rows, ["p50 by query class (ms)", "n", "median hits", *impl_names,
                         "socket/raw"]))


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--units", type=int, default=1_000_000)
    p.add_argument("--quick", action="store_true", help="100,000 units, 100 queries")
    p.add_argument("--queries", type=int, default=150, help="distinct queries")
    p.add_argument("--repeat", type=int, default=1, help="timed passes over the queries")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--cold", action="store_true",
                   help="no untimed run of each query first (times include cache misses)")
    p.add_argument("--build-only", action="store_true")
    p.add_argument("--keep", action="store_true", help="keep this run's database copy")
    p.add_argument("--no-rg", action="store_true", help="leave rg out")
    p.add_argument("--with-summaries", action="store_true",
                   help="leave the daemon's automatic summaries on (it then summarizes the "
                        "store's idle sessions while it answers)")
    p.add_argument("--no-one-liners", dest="one_liners", action="store_false",
                   help="the store without one-liners (bench/bigstore.py)")
    p.add_argument("--load", type=int, default=0, metavar="N",
                   help="N busy-looping processes (nice 0, each its own session) run beside "
                        "the timed passes: a fixed background load (bench/busy.py)")
    args = p.parse_args(argv)
    if args.quick:
        args.units, args.queries = 100_000, 100
    print(f"search benchmark: {h.machine()}")
    dir = store_dir(args.units, args.seed, args.one_liners)
    info = build(args.units, args.seed, dir)
    if args.build_only:
        return 0
    asyncio.run(run(args, dir, info))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
