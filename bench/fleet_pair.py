"""The setup of `bench/fleet.py --part search`: one
PostgreSQL server, and two daemons watching the same generated corpus, a fleet member
(`fleet`, PostgreSQL) and a daemon in SQLite mode (`sqlite`), both caught up.

    with pair(lines) as (server, daemons, info):
        ...  # daemons["fleet"], daemons["sqlite"]: harness.Memoryd, caught up
"""

from __future__ import annotations

import contextlib
import random
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import harness as h

from tests.pg_server import PgServer, find_bindir


def fleet_env(url: str, machine: str) -> dict[str, str]:
    return {"MEMORYD_STORE__URL": url, "MEMORYD_STORE__MACHINE": machine,
            "MEMORYD_STORE__NAMESPACE": "bench"}


QUIET = "both under 5% of a core for 5 s, no job running or due, no feed change left"


def background_idle(st: dict | None, now: float | None = None) -> bool:
    """What a daemon's status says of its background work: caught up, no ingest queued,
    no job running or due (a pending job may wait for a later time), and in fleet mode
    no change of the feed left to apply."""
    if not st or not st.get("caught_up") or st.get("queue_depth"):
        return False
    jobs = (st.get("summaries") or {}).get("jobs") or {}
    if jobs.get("running") or jobs.get("running_now"):
        return False
    due = jobs.get("next_run_at")
    if jobs.get("pending") and due is not None and due <= (now or time.time()):
        return False
    lag = (st.get("index") or {}).get("lag") or {}
    return not lag.get("changes")


def wait_quiet(daemons: dict[str, h.Memoryd], share: float = 0.05, window_s: float = 5.0,
               timeout_s: float = 600.0) -> dict[str, float]:
    """Until every daemon, in the same window of `window_s`, ran under `share` of a core
    and said at its start and its end that no background work was left
    (`background_idle`). Caught up is not quiet: session summaries, one-liners, their
    changes coming back through a fleet member's feed, segment merges and the like run
    for a while after, at low priority, and a search timed meanwhile shares the CPU and
    the GIL with them. 2 s under 5% of a core alone was too short: it could fall between
    two jobs (a fleet member claims them by a 5 s poll) and a "quiet" round then ran
    beside 9 s of background CPU (bench/README's history, branch `own`).
    Returns the seconds until all were quiet together."""
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout_s:
        idle = all(background_idle(d.status()) for d in daemons.values())
        before = {n: h.proc_cpu_s(d.proc.pid) for n, d in daemons.items()}
        time.sleep(window_s)
        cpu_ok = all(h.proc_cpu_s(d.proc.pid) - before[n] < share * window_s
                     for n, d in daemons.items())
        if idle and cpu_ok and all(background_idle(d.status()) for d in daemons.values()):
            took = time.monotonic() - t0
            return dict.fromkeys(daemons, took)
    raise TimeoutError(f"the daemons were not quiet together within {timeout_s:.0f} s")


@contextlib.contextmanager
def pair(lines: int, *, started=None
         ) -> Iterator[tuple[PgServer, dict[str, h.Memoryd], h.CorpusInfo]]:
    """A fresh server and the two daemons on a corpus of `lines` lines, both caught up
    (each one's count printed). `started(daemons)` is called as soon as both processes
    are spawned (before they are ready), e.g. to take a first CPU reading."""
    server = PgServer(find_bindir())
    server.init()
    server.start()
    daemons: dict[str, h.Memoryd] = {}
    try:
        info = h.corpus(max(1, lines // 500), min(lines, 500))
        with tempfile.TemporaryDirectory() as tmp, h.short_dir() as sd:
            work = Path(tmp)
            url = server.url(server.create_database())
            for name, env in (("fleet", fleet_env(url, "a")), ("sqlite", {})):
                daemons[name] = h.Memoryd(work / name, Path(info.path), sd / f"{name}.sock",
                                          log_path=work / f"{name}.log", env=env)
            if started is not None:
                started(daemons)
            t0 = time.perf_counter()
            for name, d in daemons.items():
                d.wait_ready(120)
                st = d.wait_caught_up(3600)
                print(f"{name}: {st['units']:,} units caught up "
                      f"({time.perf_counter() - t0:.0f}s since start)")
            server.bench_url = url  # type: ignore[attr-defined]
            yield server, daemons, info
    finally:
        for d in daemons.values():
            d.stop()
        server.destroy()


def alternating(daemons: dict[str, h.Memoryd], qs: list[tuple[str, str, str]]):
    """For each query, every daemon in turn (which goes first alternates query by query):
    `(i, name, daemon, calls)`, `calls` its `/v1/search` and `/v1/context` for that query,
    the context from one of the corpus's 13 project directories."""
    rng = random.Random(5)
    for i, (_cls, q, mode) in enumerate(qs):
        cwd = f"/bench/proj{rng.randrange(13):02d}"
        order = list(daemons.items())
        if i % 2:
            order.reverse()
        for name, d in order:
            yield i, name, d, (
                ("search", lambda d=d, q=q, mode=mode: d.client.search(
                    query=q, mode=mode, max_results=10)),
                ("context", lambda d=d, q=q, cwd=cwd: d.client.request(
                    "POST", "/v1/context", {"query": q, "cwd": cwd, "budget_tokens": 2000})))
