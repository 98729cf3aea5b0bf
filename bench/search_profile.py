"""Where a search's time goes, in process, on a built store: each stage of
`retrieve_sync` and of building the response, timed per query beside a bare tantivy
top-15 of the same query (the baseline of bench/search.py), and a cProfile of the whole.

Works on an existing home (a copy of bench/search.py's built store; nothing is written
to it but what opening the store does), so it adds no build:

    .venv/bin/python bench/search_profile.py --home /path/to/copied/home --queries 100
    .venv/bin/python bench/search_profile.py --home ... --cprofile 30   # top 30 functions
    .venv/bin/python bench/search_profile.py --home ... --context        # /v1/context's work
    .venv/bin/python bench/search_profile.py --home ... --rg <store>/src  # after an rg pass

Stages are timed by wrapping the functions retrieval calls (this script only; memoryd
runs unchanged): index.ranked (tantivy search + fast fields), the hits' rows from SQLite,
matched_fields (matched_ids where ranked's searcher is gone), split_scores (field_scores
while the tail holds units), the rest of retrieve_sync (planning, reranking), the
results' snippets, and the JSON encoding of the response.
"""

from __future__ import annotations

import argparse
import cProfile
import functools
import pstats
import random
import statistics
import subprocess
import sys
import time
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import harness as h  # noqa: E402
from bigstore import bare_tantivy  # noqa: E402
from search import do_bare  # noqa: E402

import memoryd.retrieval as retrieval  # noqa: E402
import memoryd.search as search_mod  # noqa: E402
from memoryd.api import SearchResponse  # noqa: E402
from memoryd.index import SearchIndex  # noqa: E402
from memoryd.paths import resolve_paths  # noqa: E402
from memoryd.store import Store  # noqa: E402

STAGES: dict[str, list[float]] = defaultdict(list)
_cur: dict[str, float] = defaultdict(float)


CPU: dict[str, list[float]] = defaultdict(list)
_cur_cpu: dict[str, float] = defaultdict(float)


def timed(name: str, fn):
    """`fn` timed into stage `name`: wall time, and the CPU time of the thread it runs on
    (a figure a loaded machine does not stretch)."""
    @functools.wraps(fn)
    def wrap(*a, **kw):
        t0, c0 = time.perf_counter(), time.thread_time()
        try:
            return fn(*a, **kw)
        finally:
            _cur[name] += time.perf_counter() - t0
            _cur_cpu[name] += time.thread_time() - c0
    return wrap


def instrument() -> None:
    SearchIndex.ranked = timed("ranked", SearchIndex.ranked)
    SearchIndex.matched_ids = timed("matched_ids", SearchIndex.matched_ids)
    SearchIndex.matched_fields = timed("matched_fields", SearchIndex.matched_fields)
    SearchIndex.split_scores = timed("split_scores", SearchIndex.split_scores)
    SearchIndex.field_scores = timed("field_scores", SearchIndex.field_scores)
    retrieval._rows = timed("rows", retrieval._rows)
    retrieval._score = timed("score", retrieval._score)
    retrieval._ranked_top = timed("dedupe+diverse", retrieval._ranked_top)
    retrieval._hits = timed("hits (with matched_ids)", retrieval._hits)
    retrieval.plan_query = timed("plan_query", retrieval.plan_query)
    search_mod._results = timed("results", search_mod._results)


def instrument_context() -> None:
    """The stages of a context request (`ContextBuilder`): its reader-thread job, the
    retrievals inside it, the index's stages, and the fitting."""
    import memoryd.context as ctx
    instrument()
    # the module `ranked` calls it in (memoryd.index.reader; memoryd.index before the split)
    index_mod = sys.modules[SearchIndex.ranked.__wrapped__.__module__]
    index_mod.session_pks = timed("session_pks", index_mod.session_pks)
    ctx.retrieve_sync = timed("retrieve_sync", ctx.retrieve_sync)
    ctx.ContextBuilder._from_store = timed("from_store (recall)", ctx.ContextBuilder._from_store)
    ctx.ContextBuilder._fit = timed("fit (tokenizer)", ctx.ContextBuilder._fit)


def context_main(args: argparse.Namespace, queries: list) -> int:
    """In process, the whole of `ContextBuilder.build` per query as an agent in one of the
    37 bench projects asks it (as bench/context_latency.py does); the reader thread's CPU
    per stage, or with --cprofile its profile (every thread the request used)."""
    import asyncio
    import threading

    import memoryd.context as ctx
    from memoryd.api import ContextRequest
    from memoryd.memory import MemoryFile

    paths = resolve_paths(args.home)
    prof = cProfile.Profile()
    profiling = False
    if args.cprofile:  # the reader thread's work: from_store and fit run there
        orig = ctx.ContextBuilder._from_store, ctx.ContextBuilder._fit

        def profiled(fn):
            def wrap(*a, **kw):
                if not profiling or threading.current_thread() is threading.main_thread():
                    return fn(*a, **kw)
                prof.enable()
                try:
                    return fn(*a, **kw)
                finally:
                    prof.disable()
            return wrap
        ctx.ContextBuilder._from_store = profiled(orig[0])
        ctx.ContextBuilder._fit = profiled(orig[1])
    else:
        instrument_context()

    async def go() -> None:
        nonlocal profiling
        store = await Store.open(paths.db)
        while not store.index.searchable():
            await asyncio.sleep(0.1)
        memory = MemoryFile.from_paths(paths, poll_interval=0)
        builder = ctx.ContextBuilder(store, memory, paths.memory_dir)
        rng = random.Random(7)
        asks = [(q, f"/bench/proj{rng.randrange(37):02d}") for _, q, _m in queries
                if retrieval.plan_query(q).match]

        async def one(q: str, cwd: str) -> None:
            _cur.clear()
            _cur_cpu.clear()
            t0, c0 = time.perf_counter(), time.process_time()
            await builder.build(ContextRequest(query=q, cwd=cwd, budget_tokens=2000))
            _cur["total"] += time.perf_counter() - t0
            _cur_cpu["total"] += time.process_time() - c0
            for k, v in _cur.items():
                STAGES[k].append(v)
                CPU[k].append(_cur_cpu.get(k, 0.0))

        for q, cwd in asks:  # warm
            await one(q, cwd)
        STAGES.clear()
        CPU.clear()
        profiling = bool(args.cprofile)
        for _ in range(args.repeat):
            for q, cwd in asks:
                await one(q, cwd)
        await store.close()

    asyncio.run(go())
    if args.cprofile:
        pstats.Stats(prof).sort_stats("tottime").print_stats(args.cprofile)
        pstats.Stats(prof).sort_stats("cumtime").print_stats(args.cprofile)
    report("contexts", "total CPU: the process's")
    return 0


def report(what: str, note: str) -> None:
    n = len(STAGES["total"])
    print(f"{n} {what}; per stage p50 / mean ms, wall and the thread's CPU (a stage "
          f"absent in a query counts 0; {note})")
    print(f"  {'':24s} {'wall p50':>8s} {'mean':>8s} {'CPU p50':>8s} {'mean':>8s}")
    for k, v in STAGES.items():
        v = v + [0.0] * (n - len(v))
        c = CPU[k] + [0.0] * (n - len(CPU[k]))
        print(f"  {k:24s} {statistics.median(v) * 1000:8.2f} {statistics.fmean(v) * 1000:8.2f}"
              f" {statistics.median(c) * 1000:8.2f} {statistics.fmean(c) * 1000:8.2f}")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--home", type=Path, required=True)
    p.add_argument("--raw", type=Path, help="the bare tantivy twin (search.py's raw-tantivy)")
    p.add_argument("--queries", type=int, default=100)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--repeat", type=int, default=2)
    p.add_argument("--cprofile", type=int, default=0, help="print the top N by own time")
    p.add_argument("--context", action="store_true",
                   help="profile /v1/context's work (ContextBuilder.build) instead")
    p.add_argument("--rg", type=Path, help="run `rg` over these transcripts (untimed) "
                   "before each timed search, as search.py does without --no-rg")
    args = p.parse_args(argv)
    print(f"{'context' if args.context else 'search'} profile: {h.machine()}")
    gen = h.TextGen(args.seed)
    queries = gen.queries(random.Random(args.seed * 101), args.queries)
    if args.context:
        return context_main(args, queries)
    paths = resolve_paths(args.home)
    store = Store.open_sync(paths.db)
    raw_ix = bare_tantivy(args.raw, create=False) if args.raw else None
    while not store.index.searchable():
        time.sleep(0.1)
    prof = cProfile.Profile()
    profiling = False
    if not args.cprofile:
        instrument()

    def one(q: str, mode: str) -> None:
        from memoryd.api import SearchRequest
        req = SearchRequest(query=q, mode=mode)
        if args.rg and profiling_run:  # untimed: the caches cold as after search.py's rg
            subprocess.run(["rg", "-i", "-F", "-c", "-e", q.split()[0], str(args.rg)],
                           capture_output=True)
        _cur.clear()
        _cur_cpu.clear()
        t0 = time.perf_counter()

        def answer(c):
            t1, c1 = time.perf_counter(), time.thread_time()
            if profiling:  # the reader thread's own profile
                prof.enable()
            r = retrieval.retrieve_sync(c, store.index, req.query, k=req.max_results,
                                        mode=req.mode, count=True)
            res = search_mod._results(r.hits, r.plan.terms)
            if profiling:
                prof.disable()
            _cur["retrieve_sync+results"] += time.perf_counter() - t1
            _cur_cpu["retrieve_sync+results"] += time.thread_time() - c1
            _cur["  its CPU (thread time)"] += time.thread_time() - c1
            return r, res

        r, res = store.read_sync(answer)
        t2, c2 = time.perf_counter(), time.thread_time()
        body = SearchResponse(total=r.total, shown=len(res), message="x",
                              results=res).model_dump_json()
        _cur["encode"] += time.perf_counter() - t2
        _cur_cpu["encode"] += time.thread_time() - c2
        _cur["total"] += time.perf_counter() - t0
        assert body
        if raw_ix is not None:
            t3, c3 = time.perf_counter(), time.thread_time()
            do_bare(raw_ix, q, mode)
            _cur["raw"] += time.perf_counter() - t3
            _cur_cpu["raw"] += time.thread_time() - c3
            _cur["  its CPU (thread time)"] += 0.0
            _cur["raw CPU (thread time)"] += time.thread_time() - c3
        for k, v in _cur.items():
            STAGES[k].append(v)
            CPU[k].append(_cur_cpu.get(k, v if "CPU" in k else 0.0))

    profiling_run = False
    for _, q, mode in queries:  # warm
        if retrieval.plan_query(q, mode).match:
            one(q, mode)
    STAGES.clear()
    CPU.clear()
    profiling = bool(args.cprofile)
    profiling_run = True
    for _ in range(args.repeat):
        for _, q, mode in queries:
            if retrieval.plan_query(q, mode).match:
                one(q, mode)
    if args.cprofile:
        pstats.Stats(prof).sort_stats("tottime").print_stats(args.cprofile)
        pstats.Stats(prof).sort_stats("cumtime").print_stats(args.cprofile)
    report("searches", "the CPU of encode, total and raw is the wall's thread's: see the "
           "CPU rows")
    store.close_sync()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
