"""Context latency on a large store: `/v1/context`'s work (ContextBuilder.build, in
process), `POST /v1/context` over the Unix socket of a memoryd subprocess serving the same
store, and `memoryctl context` as a whole process (interpreter start included), vs a bare
tantivy top-15 of the same query and `python -c pass`, in the same run.

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
import os
import random
import shutil
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import harness as h  # noqa: E402
import search as search_bench  # noqa: E402
from busy import BusyLoad  # noqa: E402

from memoryd.api import ContextRequest  # noqa: E402
from memoryd.recall.context import ContextBuilder  # noqa: E402
from memoryd.memory import MemoryFile  # noqa: E402
from memoryd.paths import resolve_paths  # noqa: E402
from memoryd.recall.retrieval import plan_query  # noqa: E402
from memoryd.daemon.store_index import open_store  # noqa: E402


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
    store = await open_store(paths.db)
    memory = MemoryFile.from_paths(paths, poll_interval=0)
    builder = ContextBuilder(store, store.index, memory, paths.memory_dir)
    raw_ix = search_bench.bare_tantivy(dir / "raw-tantivy", create=False)

    def raw(q: str) -> int:
        return search_bench.do_bare(raw_ix, q, "or")

    rng = random.Random(7)
    t: dict[str, list[float]] = {k: [] for k in ("raw", "inproc", "socket", "ctl", "pass",
                                                 "ctl-home")}
    tokens: list[int] = []
    src = dir / "empty-src"
    src.mkdir(exist_ok=True)
    ctl = [str(Path(sys.executable).parent / "memoryctl")]  # the installed entry point
    cpu: dict[str, list[float]] = {k: [] for k in ("raw", "inproc", "socket")}
    with h.short_dir() as sd:
        # the home's own socket when its path is short enough: `memoryctl` then finds it
        # from $MEMORYD_HOME as a user's hook does from the defaults ("ctl-home")
        sock = paths.socket if len(str(paths.socket)) <= 100 else sd / "m.sock"
        d = h.Memoryd(run_home, src, sock, log_path=dir / "context.log",
                      env={"MEMORYD_AUTO_SUMMARY": "0"})
        # memoryctl as installed: its bytecode cached (outside the tree), not compiled at
        # every start as PYTHONDONTWRITEBYTECODE (set on this machine) would have it
        env = {**os.environ, "MEMORYD_SOCKET": str(sock),
               "PYTHONPYCACHEPREFIX": str(dir / "pycache")}
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        home_env = {k: v for k, v in env.items() if k != "MEMORYD_SOCKET"}
        home_env["MEMORYD_HOME"] = str(run_home)
        try:
            d.wait_ready(300)
            d.wait_caught_up(300)
            for _ in range(2):  # writes memoryctl's bytecode cache, then finds it
                subprocess.run([*ctl, "--version"], env=env, check=True,
                               stdout=subprocess.DEVNULL)
            with BusyLoad(args.load) as load:  # the fixed background load, if any
                for i, (_cls, q, _mode) in enumerate(queries):
                    cwd = f"/bench/proj{rng.randrange(37):02d}"
                    if plan_query(q).match is None:
                        continue
                    req = ContextRequest(query=q, cwd=cwd, budget_tokens=2000)
                    body = {"query": q, "cwd": cwd, "budget_tokens": 2000}
                    await builder.build(req)  # warm: every side finds its pages cached
                    raw(q)
                    d.client.request("POST", "/v1/context", body)

                    async def inproc(req=req) -> None:
                        tokens.append((await builder.build(req))["total_tokens"])

                    sides = [("raw", lambda q=q: raw(q)), ("inproc", inproc),
                             ("socket", lambda body=body: d.client.request(
                                 "POST", "/v1/context", body))]
                    if i < args.processes:
                        sides += [("ctl", lambda q=q, cwd=cwd: subprocess.run(
                                      [*ctl, "context", "--cwd", cwd, q], env=env, check=True,
                                      stdout=subprocess.DEVNULL)),
                                  ("pass", lambda: subprocess.run([sys.executable, "-c", "pass"],
                                                                  check=True))]
                        if sock == paths.socket:
                            sides.append(("ctl-home", lambda q=q, cwd=cwd: subprocess.run(
                                [*ctl, "context", "--cwd", cwd, q], env=home_env, check=True,
                                stdout=subprocess.DEVNULL)))
                    k = i % len(sides)
                    for name, fn in sides[k:] + sides[:k]:  # rotating order
                        # CPU: this thread's for bare tantivy, this process's in process, the
                        # daemon's (all threads) over the socket: the load does not stretch it
                        clock = (lambda: h.proc_cpu_s(d.proc.pid)) if name == "socket" else \
                            time.thread_time if name == "raw" else time.process_time
                        c0, t0 = clock(), time.perf_counter()
                        got = fn()
                        if asyncio.iscoroutine(got):
                            await got
                        t[name].append(time.perf_counter() - t0)
                        if name in cpu:
                            cpu[name].append(clock() - c0)
        finally:
            d.stop()
            await store.close()
            shutil.rmtree(run_home, ignore_errors=True)
    s = {k: h.summary(v) for k, v in t.items() if v}
    r = s["raw"]
    print(f"{len(t['inproc'])} queries on {args.units:,} units, budget 2000 "
          f"(median rendered {sorted(tokens)[len(tokens) // 2]} tokens, max {max(tokens)})")
    print(load.report())
    rows = [["raw: bare tantivy, same query, top 15", h.ms(r["p50"]), h.ms(r["p99"]), "", ""]]
    for k, name in (("inproc", "memoryd ContextBuilder.build"),
                    ("socket", "memoryd POST /v1/context over the socket")):
        rows.append([name, h.ms(s[k]["p50"]), h.ms(s[k]["p99"]), h.ratio(s[k]["p50"], r["p50"]),
                     h.ratio(s[k]["p99"], r["p99"])])
    if "ctl" in s:
        rows.append(["raw: python -c pass (whole process)", h.ms(s["pass"]["p50"]),
                     h.ms(s["pass"]["p99"]), "", ""])
        rows.append(["memoryctl context (whole process)", h.ms(s["ctl"]["p50"]),
                     h.ms(s["ctl"]["p99"]), h.ratio(s["ctl"]["p50"], s["pass"]["p50"]),
                     h.ratio(s["ctl"]["p99"], s["pass"]["p99"])])
        if "ctl-home" in s:
            rows.append(["memoryctl context, socket found from $MEMORYD_HOME",
                         h.ms(s["ctl-home"]["p50"]), h.ms(s["ctl-home"]["p99"]),
                         h.ratio(s["ctl-home"]["p50"], s["pass"]["p50"]),
                         h.ratio(s["ctl-home"]["p99"], s["pass"]["p99"])])
    print(h.table(rows, ["context latency", "p50", "p99", "p50 ratio", "p99 ratio"]))
    mean = {k: sum(v) / len(v) for k, v in cpu.items() if v}
    print("CPU per request, mean ms (bare tantivy: its thread; in process: the whole bench "
          "process; over the socket: the daemon, all threads, the served-context log's "
          "write included): " + ", ".join(
              f"{k} {mean[k] * 1000:.2f}" + ("" if k == "raw" else
                                              f" ({h.ratio(mean[k], mean['raw'])})")
              for k in mean))
    c = s["socket"]
    print("goal over the socket: p50 <= 5 ms, p99 <= 25 ms: "
          f"{'met' if c['p50'] <= 0.005 and c['p99'] <= 0.025 else 'NOT met'}")


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--units", type=int, default=1_000_000)
    p.add_argument("--quick", action="store_true", help="100,000 units, 80 queries")
    p.add_argument("--queries", type=int, default=150)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--processes", type=int, default=40,
                   help="queries also asked through `memoryctl context` as a whole process")
    p.add_argument("--no-one-liners", dest="one_liners", action="store_false",
                   help="the store without one-liners (bench/bigstore.py)")
    p.add_argument("--load", type=int, default=0, metavar="N",
                   help="N busy-looping processes (nice 0, each its own session) run beside "
                        "the timed queries: a fixed background load (bench/busy.py)")
    args = p.parse_args()
    if args.quick:
        args.units, args.queries = 100_000, 80
    print(h.machine())
    dir = search_bench.store_dir(args.units, args.seed, args.one_liners)
    search_bench.build(args.units, args.seed, dir)
    asyncio.run(run(args, dir))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
