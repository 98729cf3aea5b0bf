"""Embeddings in a fleet (issue 31 item 2): shared through the store, or recomputed per
machine? One PostgreSQL server (tests.pg_server), two daemons with embeddings on in one
namespace: machine `a` watches a generated corpus (--lines), machine `b` an empty folder.
`a` embeds its units; the change feed carries each vector to `b`'s row cache.

Printed, from the same run, over the window from a's first vector until b's row cache
holds them all, each daemon's whole process CPU less its own CPU at rest (10 s measured
after the window), per vector:
  a       embedding a unit and applying its vector back through the feed: what every
          machine would pay for every unit of the namespace if each computed its own
  b       receiving a vector: the feed's re-read of the unit with it, the row cache's
          write, re-indexing the unit: what sharing costs a machine that did not embed
  ratio   a / b: how many times cheaper a vector is to receive than to compute
  lag     a's worker caught up -> b's cache holds every vector

    .venv/bin/python bench/fleet_embed.py --lines 400
"""

from __future__ import annotations

import argparse
import sqlite3
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from bench import harness as h  # noqa: E402
from bench.fleet_pair import fleet_env  # noqa: E402
from tests.pg_server import PgServer, find_bindir  # noqa: E402


def cached_vectors(home: Path) -> int:
    """Vectors in a fleet member's row cache (index/rows.sqlite under its home)."""
    for path in home.rglob("rows.sqlite"):
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        try:
            return conn.execute("SELECT count(*) FROM unit_vectors").fetchone()[0]
        except sqlite3.Error:
            return 0
        finally:
            conn.close()
    return 0


def wait(pred, timeout: float, what: str, interval: float = 0.1):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if (v := pred()):
            return v
        time.sleep(interval)
    raise TimeoutError(what)


def measure(A: h.Memoryd, B: h.Memoryd) -> None:
    daemons = {"a": A, "b": B}
    # the first vector written: from here both daemons' CPU counts (b has a's units)
    wait(lambda: (A.status() or {}).get("embed", {}).get("done"), 600,
         "a's worker embedded nothing")
    cpu0 = {k: h.proc_cpu_s(d.proc.pid) for k, d in daemons.items()}
    n0, t0 = cached_vectors(B.home), time.monotonic()
    st = wait(lambda: (s := A.status()) and s["embed"]["caught_up"] and s, 3600,
              "a's worker did not catch up")
    t_done = time.monotonic()
    n = st["embed"]["done"]
    wait(lambda: cached_vectors(B.home) >= n, 600, "b's cache lacks vectors")
    lag = time.monotonic() - t_done
    window = time.monotonic() - t0
    used = {k: h.proc_cpu_s(d.proc.pid) - cpu0[k] for k, d in daemons.items()}
    rest0 = {k: h.proc_cpu_s(d.proc.pid) for k, d in daemons.items()}
    time.sleep(10)
    rest = {k: (h.proc_cpu_s(d.proc.pid) - rest0[k]) / 10 for k, d in daemons.items()}
    received = n - n0
    per = {k: max(0.0, used[k] - rest[k] * window) / received for k in daemons}
    print(f"vectors: {n:,} embedded by a, {received:,} of them received by b in "
          f"{window:.0f} s; b embedded "
          f"{(B.status() or {}).get('embed', {}).get('embedded_this_run')}")
    for k, what in (("a", "embeds and applies"), ("b", "receives")):
        print(f"{k}      {per[k] * 1000:7.2f} ms CPU a vector ({what}; {used[k]:.1f} s in "
              f"the window, {rest[k] * 100:.1f}% of a core at rest)")
    print(f"ratio  a / b = {per['a'] / per['b']:.1f}x")
    print(f"lag    a caught up -> b's cache complete: {lag * 1000:.0f} ms")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--lines", type=int, default=400)
    a = p.parse_args()
    print(h.machine())
    server = PgServer(find_bindir())
    server.init()
    server.start()
    daemons: list[h.Memoryd] = []
    try:
        info = h.corpus(1, a.lines)
        with tempfile.TemporaryDirectory() as tmp, h.short_dir() as sd:
            work = Path(tmp)
            empty = work / "empty"
            empty.mkdir()
            url = server.url(server.create_database())
            for name, src in (("a", Path(info.path)), ("b", empty)):
                daemons.append(h.Memoryd(work / name, src, sd / f"{name}.sock",
                                         log_path=work / f"{name}.log",
                                         env={**fleet_env(url, name),
                                              "MEMORYD_EMBED__ENABLED": "true"}))
            for d in daemons:
                d.wait_ready(120)
                d.wait_caught_up(600)
            measure(*daemons)
    finally:
        for d in daemons:
            d.stop()
        server.destroy()


if __name__ == "__main__":
    main()
