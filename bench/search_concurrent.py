"""Search latency over the socket with several clients at once: does a change that
overlaps parts of one search on a second core (`memoryd.index.helper`) hold up when the
cores are shared with other requests?

One daemon serves a fresh copy of bench/search.py's built store (automatic summaries
off); for each client count, that many client processes send the bench's queries over
the Unix socket one at a time each (`MemorydClient`, as `memoryctl` does), every client
starting at its own place in the query list, after one untimed pass. Reported per count:
p50 / p99 of every request, requests per second, and the daemon's CPU per request (all
its threads, from /proc).

    MEMORYD_BENCH_OUT=/work/bench-data .venv/bin/python bench/search_concurrent.py \\
        --units 1000000 --queries 100 --clients 1,2,4
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import random
import shutil
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import harness as h  # noqa: E402
from bigstore import store_dir  # noqa: E402
from idle import fresh_copy  # noqa: E402

from memoryd.client import MemorydClient  # noqa: E402
from memoryd.retrieval import plan_query  # noqa: E402


def client(sock: str, queries: list[tuple[str, str]], start: int, rounds: int,
           go: mp.Event, out: mp.Queue) -> None:  # type: ignore[valid-type]
    c = MemorydClient(Path(sock))
    order = queries[start:] + queries[:start]
    go.wait()
    times = []
    for _ in range(rounds):
        for q, mode in order:
            t0 = time.perf_counter()
            c.search(query=q, mode=mode)
            times.append(time.perf_counter() - t0)
    out.put(times)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--units", type=int, default=1_000_000)
    p.add_argument("--queries", type=int, default=100)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--rounds", type=int, default=2, help="timed passes per client")
    p.add_argument("--clients", default="1,2,4", help="client counts, comma separated")
    p.add_argument("--no-one-liners", dest="one_liners", action="store_false")
    args = p.parse_args(argv)
    print(f"concurrent search: {h.machine()}")
    dir = store_dir(args.units, args.seed, args.one_liners)
    gen = h.TextGen(args.seed)
    queries = [(q, m) for _, q, m in gen.queries(random.Random(args.seed * 101), args.queries)
               if plan_query(q, m).match is not None]
    run_home = fresh_copy(dir, "run-home")
    src = dir / "empty-src"
    src.mkdir(exist_ok=True)
    rows = []
    with h.short_dir() as sd:
        d = h.Memoryd(run_home, src, sd / "m.sock", log_path=dir / "memoryd.log",
                      env={"MEMORYD_AUTO_SUMMARY": "0"})
        try:
            d.wait_ready(300)
            d.wait_caught_up(300)
            for q, mode in queries:  # warm: pages into the caches
                d.client.search(query=q, mode=mode)
            for n in [int(x) for x in args.clients.split(",")]:
                go, out = mp.Event(), mp.Queue()
                procs = [mp.Process(target=client, args=(
                    str(sd / "m.sock"), queries, i * len(queries) // n, args.rounds, go, out))
                    for i in range(n)]
                for pr in procs:
                    pr.start()
                time.sleep(0.5)
                load = h.machine().rsplit("load", 1)[-1].strip()
                c0, t0 = h.proc_cpu_s(d.proc.pid), time.perf_counter()
                go.set()
                times = [t for _ in procs for t in out.get()]
                wall = time.perf_counter() - t0
                cpu = h.proc_cpu_s(d.proc.pid) - c0
                for pr in procs:
                    pr.join()
                s = h.summary(times)
                rows.append([str(n), f"{s['p50'] * 1000:.2f}", f"{s['p99'] * 1000:.2f}",
                             f"{len(times) / wall:.0f}", f"{cpu / len(times) * 1000:.2f}",
                             load])
        finally:
            d.stop()
            shutil.rmtree(run_home, ignore_errors=True)
    print(h.table(rows, ["clients", "p50 ms", "p99 ms", "searches/s",
                         "daemon CPU ms/search", "load before"]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
