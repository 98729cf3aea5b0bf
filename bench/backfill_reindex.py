"""A rebuild at 200k units: `memoryctl reindex` on a daemon that has caught up on the
backfill corpus (`backfill.py`'s generator), how long until the index is ready again,
the daemon's CPU meanwhile (its child processes' included: a rebuild's index writing
runs in one, `memoryd.index.bulk`), and searches over the socket meanwhile (one after
another, p50/p99; they answer from the fallback scan while the index is rebuilding)
against the same searches before the reindex. No raw baseline: compare two builds run
alternately (e.g. main from a `git archive`).

    .venv/bin/python bench/backfill_reindex.py            # 400 files x 500 lines
    .venv/bin/python bench/backfill_reindex.py --quick    # 100 files x 300 lines
"""

from __future__ import annotations

import argparse
import random
import shutil
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import harness as h  # noqa: E402
from idle import cpu_s  # noqa: E402


def pct(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))]


def searches(d: h.Memoryd, queries: list[tuple[str, str]], until) -> list[float]:
    """Searches in turn (cycling through `queries`) until `until()`; ms each."""
    ms, i = [], 0
    while not until():
        q, mode = queries[i % len(queries)]
        t0 = time.perf_counter()
        d.client.search(query=q, mode=mode)
        ms.append(1000 * (time.perf_counter() - t0))
        i += 1
    return ms


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    h.corpus_options(p)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--queries", type=int, default=100)
    args = h.corpus_size(p.parse_args(argv))
    print(f"reindex benchmark: {h.machine()}")
    info = h.corpus(args.files, args.lines, args.seed)
    gen = h.TextGen(args.seed)
    queries = [(q, m) for _, q, m in gen.queries(random.Random(args.seed * 7), args.queries)]
    work = h.OUT / "reindex-run"
    shutil.rmtree(work, ignore_errors=True)
    with h.short_dir() as sd:
        d = h.Memoryd(work / "home", Path(info.path), sd / "m.sock",
                      log_path=work / "memoryd.log", env={"MEMORYD_AUTO_SUMMARY": "0"})
        try:
            d.wait_ready(120)
            st = d.wait_caught_up(600)
            before = []
            for q, mode in queries:
                t0 = time.perf_counter()
                d.client.search(query=q, mode=mode)
                before.append(1000 * (time.perf_counter() - t0))
            c0, t0 = cpu_s(d.proc.pid), time.perf_counter()
            d.client.run_job("reindex", {})

            def ready() -> bool:
                s = d.status() or {}
                return s.get("index", {}).get("state") == "ready" and bool(s.get("caught_up"))

            during = searches(d, queries, ready)
            secs, cpu = time.perf_counter() - t0, cpu_s(d.proc.pid) - c0
        finally:
            d.stop()
    shutil.rmtree(work, ignore_errors=True)
    print(f"{st['units']:,} units: reindex -> ready {secs:.2f} s, daemon CPU {cpu:.2f} s "
          f"({1e6 * cpu / st['units']:.0f} us a unit)")
    print(f"search before: p50 {statistics.median(before):.2f} / p99 {pct(before, 0.99):.2f} ms "
          f"({len(before)}); during the rebuild: p50 {statistics.median(during):.2f} / p99 "
          f"{pct(during, 0.99):.2f} ms ({len(during)})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
