"""Where a socket search's wall time goes when the machine is busy: per daemon thread (and
the client), CPU, time spent runnable but waiting for a core, and how often each thread
went to sleep and was woken, per search, at several fixed background loads in one run.

A daemon serves a copy of a store bench/bigstore.py built (`--store`, as search.py's);
the client (this process, one thread) sends the bench queries one at a time as
`memoryctl` does (`MemorydClient`: a connection per request). Each pass runs the queries
at one background load (bench/busy.py: N busy-looping processes, each its own session),
the loads taking turns (`--loads 0,1,2`, `--passes` rounds). Per thread, from the
scheduler's own account: `/proc/<pid>/task/<tid>/schedstat` (CPU; run-queue wait: time
runnable but not running; timeslices) and `/proc/<pid>/task/<tid>/status` (voluntary
switches = the thread slept and was woken; involuntary = a running thread preempted).
Threads are named by `py-spy dump`.

    MEMORYD_BENCH_OUT=/tmp/x .venv/bin/python bench/search_wait.py \\
        --store /tmp/x/search-g2-1000000-s1-ol --queries 100 --loads 0,1,2 --passes 2
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import statistics
import sys
import threading
import time
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import harness as h  # noqa: E402
from busy import BusyLoad  # noqa: E402
from loop_cpu import SPY, thread_names  # noqa: E402

from memoryd.paths import resolve_paths  # noqa: E402
from memoryd.retrieval import plan_query  # noqa: E402

FIELDS = ("cpu", "wait", "slices", "vol", "invol")


def thread_stats(pid: int, tids: list[int] | None = None) -> dict[int, tuple[float, ...]]:
    """tid -> (CPU s, run-queue wait s, timeslices, voluntary, involuntary switches)."""
    out = {}
    task = Path(f"/proc/{pid}/task")
    for tid in tids if tids is not None else [int(t.name) for t in task.iterdir()]:
        try:
            cpu, wait, slices = (task / str(tid) / "schedstat").read_text().split()[:3]
            status = (task / str(tid) / "status").read_text()
        except (OSError, ValueError):
            continue
        sw = dict(ln.split(":\t") for ln in status.splitlines()
                  if ln.startswith(("voluntary_ctxt", "nonvoluntary_ctxt")))
        out[tid] = (int(cpu) / 1e9, int(wait) / 1e9, int(slices),
                    int(sw["voluntary_ctxt_switches"]), int(sw["nonvoluntary_ctxt_switches"]))
    return out


def group(name: str) -> str:
    if name in ("loop", "client"):
        return name
    for key, g in (("helper", "helper"), ("reader", "reader"), ("writer", "writer"),
                   ("tantivy", "tantivy"), ("index", "index")):
        if key in name:
            return g
    return "other"


def delta(before: dict, after: dict, names: dict[int, str]) -> dict[str, list[float]]:
    out: dict[str, list[float]] = defaultdict(lambda: [0.0] * len(FIELDS))
    for tid, a in after.items():
        b = before.get(tid, (0.0,) * len(FIELDS))
        g = out[group(names.get(tid, "?"))]
        for i in range(len(FIELDS)):
            g[i] += a[i] - b[i]
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--store", type=Path, required=True,
                   help="a directory bench/bigstore.py built (its home/ is copied)")
    p.add_argument("--queries", type=int, default=100)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--loads", default="0,1,2", help="background loads, in turn")
    p.add_argument("--passes", type=int, default=2, help="rounds over the loads")
    args = p.parse_args(argv)
    loads = [int(x) for x in args.loads.split(",")]
    gen = h.TextGen(args.seed)
    queries = [(q, m) for _, q, m in gen.queries(random.Random(args.seed * 101), args.queries)
               if plan_query(q, m).match is not None]
    print(f"search wait: {h.machine()}")
    run_home = h.OUT / "wait-run-home"
    shutil.rmtree(run_home, ignore_errors=True)
    paths = resolve_paths(run_home)
    paths.ensure()
    built = resolve_paths(args.store / "home")
    shutil.copyfile(built.db, paths.db)
    shutil.copytree(built.data_dir / "index", paths.data_dir / "index")
    src = h.OUT / "wait-empty-src"
    src.mkdir(exist_ok=True)
    me = threading.get_native_id()
    rows: dict[int, list[dict]] = defaultdict(list)
    with h.short_dir() as sd:
        d = h.Memoryd(run_home, src, sd / "m.sock", log_path=h.OUT / "wait-memoryd.log",
                      env={"MEMORYD_AUTO_SUMMARY": "0"})
        try:
            d.wait_ready(300)
            d.wait_caught_up(300)
            pid = d.proc.pid
            for q, m in queries:  # warm: pages cached, the helper thread started
                d.client.search(query=q, mode=m)
            names = thread_names(pid) if SPY.exists() else {pid: "loop"}
            for _ in range(args.passes):
                for n in loads:
                    with BusyLoad(n) as load:
                        time.sleep(0.2)  # the loaders running before the first search
                        walls = []
                        c0 = thread_stats(os.getpid(), [me])
                        s0 = thread_stats(pid)
                        for q, m in queries:
                            t0 = time.perf_counter()
                            d.client.search(query=q, mode=m)
                            walls.append(time.perf_counter() - t0)
                        s1 = thread_stats(pid)
                        c1 = thread_stats(os.getpid(), [me])
                    by = delta(s0, s1, names)
                    by["client"] = delta(c0, c1, {me: "client"})["client"]
                    rows[n].append({"walls": walls, "by": by, "shares": load.shares,
                                    "load": load.load_end})
        finally:
            d.stop()
            shutil.rmtree(run_home, ignore_errors=True)
    for n in loads:
        print()
        for r in rows[n]:
            k = len(r["walls"])
            s = h.summary(r["walls"])
            daemon = sum(v[0] for g, v in r["by"].items() if g != "client")
            shares = ", ".join(f"{x:.2f}" for x in r["shares"]) or "-"
            print(f"--load {n} (loaders' CPU share {shares}; load average {r['load']:.2f}): "
                  f"{k} searches, p50 {s['p50'] * 1e3:.2f} / p99 {s['p99'] * 1e3:.2f} ms, "
                  f"mean {statistics.fmean(r['walls']) * 1e3:.2f}; daemon CPU "
                  f"{daemon / k * 1e3:.2f} ms per search")
            out = []
            for g in sorted(r["by"], key=lambda g: -r["by"][g][0]):
                v = r["by"][g]
                if v[0] / k < 5e-6 and v[3] / k < 0.05:
                    continue
                out.append([g, f"{v[0] / k * 1e3:.3f}", f"{v[1] / k * 1e3:.3f}",
                            f"{v[2] / k:.2f}", f"{v[3] / k:.2f}", f"{v[4] / k:.2f}"])
            print(h.table(out, ["per search", "CPU ms", "run-queue wait ms", "timeslices",
                                "woken (vol)", "preempted"]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
