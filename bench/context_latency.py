"""Context latency on a large store: `/v1/context`'s work (ContextBuilder.build, in
process) vs a bare tantivy top-15 of the same query, in the same run.

Uses the store bench/search.py builds and caches (1,000,000 units by default; sessions
in 37 project folders /bench/projNN). Each query is asked as an agent working in one of
those projects would: cwd = a project folder, budget 2000 tokens, the default sections
(long-term memory from an empty MEMORY.md, recalled turns); that is two retrievals
(this project, then everyone) plus token counting of the rendered block. The raw
baseline is the bare tantivy twin (search.py) answering the query memoryd builds, top 15.

    .venv/bin/python bench/context_latency.py            # 1M units (builds once: ~10 min)
    .venv/bin/python bench/context_latency.py --quick    # 100k units
"""

from __future__ import annotations

import argparse
import asyncio
import random
import shutil
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import harness as h  # noqa: E402
import search as search_bench  # noqa: E402

from memoryd.api import ContextRequest  # noqa: E402
from memoryd.context import ContextBuilder  # noqa: E402
from memoryd.memory import MemoryFile  # noqa: E402
from memoryd.paths import resolve_paths  # noqa: E402
from memoryd.retrieval import plan_query  # noqa: E402
from memoryd.store import Store  # noqa: E402


async def run(args: argparse.Namespace, dir: Path) -> None:
    gen = h.TextGen(args.seed)
    queries = gen.queries(random.Random(args.seed * 101), args.queries)
    run_home = dir / "context-run-home"
    shutil.rmtree(run_home, ignore_errors=True)
    paths = resolve_paths(run_home)
    paths.ensure()
    built = resolve_paths(dir / "home")
    shutil.copyfile(built.db, paths.db)  # memoryd may migrate it
    shutil.copytree(built.data_dir / "index", paths.data_dir / "index")
    store = await Store.open(paths.db)
    memory = MemoryFile.from_paths(paths, poll_interval=0)
    builder = ContextBuilder(store, memory, paths.memory_dir)
    raw_ix = search_bench.bare_tantivy(dir / "raw-tantivy", create=False)

    def raw(q: str) -> int:
        return search_bench.do_bare(raw_ix, q, "or")

    rng = random.Random(7)
    t_ctx: list[float] = []
    t_raw: list[float] = []
    tokens: list[int] = []
    try:
        for _cls, q, _mode in queries:
            match = plan_query(q).match
            req = ContextRequest(query=q, cwd=f"/bench/proj{rng.randrange(37):02d}",
                                 budget_tokens=2000)
            if match is None:
                continue
            await builder.build(req)  # warm: both sides find their pages cached
            raw(q)
            t0 = time.perf_counter()
            pack = await builder.build(req)
            t_ctx.append(time.perf_counter() - t0)
            tokens.append(pack["total_tokens"])
            t0 = time.perf_counter()
            raw(q)
            t_raw.append(time.perf_counter() - t0)
    finally:
        await store.close()
        shutil.rmtree(run_home, ignore_errors=True)
    c, r = h.summary(t_ctx), h.summary(t_raw)
    print(f"{len(t_ctx)} queries on {args.units:,} units, budget 2000 "
          f"(median rendered {sorted(tokens)[len(tokens) // 2]} tokens, max {max(tokens)})")
    print(h.table([
        ["raw: bare tantivy, same query, top 15", h.ms(r["p50"]), h.ms(r["p99"]), "", ""],
        ["memoryd ContextBuilder.build", h.ms(c["p50"]), h.ms(c["p99"]),
         h.ratio(c["p50"], r["p50"]), h.ratio(c["p99"], r["p99"])],
    ], ["context latency", "p50", "p99", "p50 ratio", "p99 ratio"]))
    print("goal: p50 <= 5 ms, p99 <= 25 ms: "
          f"{'met' if c['p50'] <= 0.005 and c['p99'] <= 0.025 else 'NOT met'}")


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--units", type=int, default=1_000_000)
    p.add_argument("--quick", action="store_true", help="100,000 units, 80 queries")
    p.add_argument("--queries", type=int, default=150)
    p.add_argument("--seed", type=int, default=1)
    args = p.parse_args()
    if args.quick:
        args.units, args.queries = 100_000, 80
    print(h.machine())
    dir = h.OUT / f"search-g{h.GEN_VERSION}-{args.units}-s{args.seed}"
    search_bench.build(args.units, args.seed, dir)
    asyncio.run(run(args, dir))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
