"""A long history consolidated from the first start (issue 27 item 4): memoryd starts on
1,000 sessions spread over 90 past days (bench/admission.py's synthetic sessions), reads
them, then consolidates every day by itself, oldest first, in the background. Prints the
time from start until every day is consolidated, and search latency and append ->
searchable while that runs against the same measured at rest afterwards (same run).

    .venv/bin/python bench/history_catchup.py [--sessions 1000] [--days 90]
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import os
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from bench.admission import synthetic_session, write_sessions  # noqa: E402
from bench.harness import table  # noqa: E402
from memoryd.client import MemorydClient  # noqa: E402
from memoryd.config import load_settings  # noqa: E402
from memoryd.daemon import Daemon  # noqa: E402
from memoryd.paths import resolve_paths  # noqa: E402


def history(st: dict[str, Any]) -> dict[str, Any]:
    return (st.get("consolidation") or {}).get("history") or {}


async def probe(c: MemorydClient, src: Path, n: int) -> tuple[float, float]:
    """(search ms, append -> searchable ms) for one fresh word."""
    word = f"probeword{n}x{random.randrange(10**6)}"
    t0 = time.perf_counter()
    await asyncio.to_thread(c.search, query="migrations fixtures", max_results=10)
    search_ms = (time.perf_counter() - t0) * 1000
    p = src / "probe" / f"p{n}.jsonl"
    p.parent.mkdir(parents=True, exist_ok=True)
    ts = dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    t0 = time.perf_counter()
    p.write_text(f'{{"role": "user", "content": "{word}", "id": "p{n}", "timestamp": "{ts}"}}\n')
    while (await asyncio.to_thread(c.search, query=word))["total"] == 0:
        if time.perf_counter() - t0 > 30:
            break
        await asyncio.sleep(0.005)
    return search_ms, (time.perf_counter() - t0) * 1000


def med(xs: list[float]) -> str:
    return f"{statistics.median(xs):.1f} ms" if xs else "—"


async def main_async(a: argparse.Namespace) -> int:
    rng = random.Random(5)
    with tempfile.TemporaryDirectory(prefix="md-hist") as t:
        tmp = Path(t)
        src = tmp / "src"
        first = dt.date.today() - dt.timedelta(days=a.days + 1)
        days = [first + dt.timedelta(days=i) for i in range(a.days)]
        write_sessions(src, [(f"p{i % 7}/{days[i % a.days].isoformat()}-{i}.jsonl",
                              synthetic_session(rng, days[i % a.days], i, f"p{i % 7}",
                                                rng.random() < 0.2))
                             for i in range(a.sessions)])
        sock = Path(tempfile.mkdtemp(prefix="mdh", dir="/tmp")) / "m.sock"
        s = load_settings(None, environ={}, overrides={
            "watch": {"sources": [{"agent": "generic", "path": src}],
                      "default_sources": False},
            "server": {"socket": sock, "tcp_enabled": False},
            "retention": {"enabled": False},
            "consolidate": {"timezone": "UTC"}})
        d = Daemon(s, resolve_paths(tmp / "home"), environ={})
        t0 = time.perf_counter()
        await d.start()
        c = MemorydClient(sock, timeout=60)
        during_search: list[float] = []
        during_lag: list[float] = []
        try:
            read_at = None
            n = 0
            while True:
                st = await asyncio.to_thread(c.status)
                h = history(st)
                if read_at is None and st["caught_up"]:
                    read_at = time.perf_counter() - t0
                if read_at is not None and h.get("looked") and h.get("days_left") == 0 \
                        and h.get("days_done"):
                    break
                if read_at is not None:
                    sm, lag = await probe(c, src, n)
                    n += 1
                    during_search.append(sm)
                    during_lag.append(lag)
                await asyncio.sleep(0.2)
                if time.perf_counter() - t0 > a.timeout:
                    print("timed out waiting for the history")
                    break
            done_at = time.perf_counter() - t0
            rest_search: list[float] = []
            rest_lag: list[float] = []
            for _ in range(max(10, len(during_search))):
                sm, lag = await probe(c, src, n)
                n += 1
                rest_search.append(sm)
                rest_lag.append(lag)
            h = history(await asyncio.to_thread(c.status))
        finally:
            await d.stop()
    print(f"{a.sessions} sessions over {a.days} days: read in {read_at:.1f} s, every day "
          f"consolidated {done_at:.1f} s after start ({done_at - (read_at or 0):.1f} s of "
          f"history; {h.get('days_done')} days done)")
    print(table([["search p50", med(during_search), med(rest_search),
                  f"{statistics.median(during_search) / statistics.median(rest_search):.2f}x"
                  if during_search and rest_search else "—"],
                 ["append -> searchable p50", med(during_lag), med(rest_lag),
                  f"{statistics.median(during_lag) / statistics.median(rest_lag):.2f}x"
                  if during_lag and rest_lag else "—"]],
                ["measure", f"while consolidating ({len(during_search)} probes)", "at rest",
                 "ratio"]))
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sessions", type=int, default=1000)
    ap.add_argument("--days", type=int, default=90)
    ap.add_argument("--timeout", type=float, default=1800)
    return asyncio.run(main_async(ap.parse_args()))


if __name__ == "__main__":
    raise SystemExit(main())
