"""The web page's weight and time on a large store (issue 30): for each page, the bytes of
HTML, CSS and JS a first visit loads, and the time from request to the last byte over
localhost TCP (p50 and p90 of N requests after one warm-up), against `GET
/static/style.css` in the same run — the same HTTP path, cookie check and middleware with
no work behind it: the raw baseline.

Uses the store bench/bigstore.py builds and caches (1,000,000 units by default), copied
to a run home as context_latency.py does; memoryd serves it as a subprocess.

    .venv/bin/python bench/web_pages.py             # 1M units (builds once)
    .venv/bin/python bench/web_pages.py --quick     # 100k units
"""

from __future__ import annotations

import argparse
import asyncio
import random
import re
import shutil
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import aiohttp  # noqa: E402
import harness as h  # noqa: E402
from bigstore import build, store_dir  # noqa: E402

from memoryd.paths import resolve_paths  # noqa: E402

ASSETS = re.compile(r'<(?:script|link)[^>]+(?:src|href)="(/static/[^"]+)"')


async def timed(http: aiohttp.ClientSession, url: str) -> tuple[float, int, int, str]:
    t0 = time.perf_counter()
    async with http.get(url) as r:
        body = await r.read()
    return (time.perf_counter() - t0) * 1000, r.status, len(body), body.decode(errors="replace")


async def measure(base: str, login: str, n: int, pages: dict[str, str]) -> list[list[str]]:
    jar = aiohttp.CookieJar(unsafe=True)
    rows = []
    async with aiohttp.ClientSession(cookie_jar=jar) as http:
        async with http.get(login) as r:
            await r.read()
        raw = [(await timed(http, base + "/static/style.css"))[0] for _ in range(n + 1)][1:]
        rows.append(["raw: GET /static/style.css", "—", "—",
                     f"{statistics.median(raw):.1f}",
                     f"{statistics.quantiles(raw, n=10)[-1]:.1f}", "1.0×"])
        for name, path in pages.items():
            ms, status, size, html = await timed(http, base + path)  # warm-up
            if status != 200:
                rows.append([name, f"HTTP {status}", "", "", "", ""])
                continue
            assets = 0
            for a in sorted(set(ASSETS.findall(html))):
                assets += (await timed(http, base + a))[2]
            times = [(await timed(http, base + path))[0] for _ in range(n)]
            p50 = statistics.median(times)
            rows.append([name, f"{size / 1024:.1f} kB", f"{assets / 1024:.1f} kB",
                         f"{p50:.1f}", f"{statistics.quantiles(times, n=10)[-1]:.1f}",
                         f"{p50 / statistics.median(raw):.1f}×"])
    return rows


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--units", type=int, default=1_000_000)
    ap.add_argument("--quick", action="store_true", help="100k units")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("-n", type=int, default=20, help="requests per page")
    a = ap.parse_args()
    units = 100_000 if a.quick else a.units
    dir = store_dir(units, a.seed, True)
    build(units, a.seed, dir)  # cached: returns at once when built
    run_home = dir / "web-run-home"
    shutil.rmtree(run_home, ignore_errors=True)
    paths = resolve_paths(run_home)
    paths.ensure()
    built = resolve_paths(dir / "home")
    shutil.copyfile(built.db, paths.db)
    shutil.copytree(built.data_dir / "index", paths.data_dir / "index")
    src = dir / "empty-src"
    src.mkdir(exist_ok=True)
    with h.short_dir() as sd:
        d = h.Memoryd(run_home, src, sd / "m.sock", log_path=dir / "web.log",
                      env={"MEMORYD_AUTO_SUMMARY": "0"})
        try:
            d.wait_ready(300)
            st = d.wait_caught_up(600)
            login = d.client.request("POST", "/v1/web/login")["url"]
            base = login.split("/login")[0]
            sessions = d.client.request("GET", "/v1/sessions", query={"limit": 1})
            sid = (sessions.get("sessions") or [{}])[0]
            word = h.TextGen(a.seed).queries(random.Random(3), 1)[0][1]
            pages = {"overview /": "/", f"search ?q={word}": f"/search?q={word}",
                     "sessions": "/sessions",
                     "a session": f"/sessions/{sid.get('session_id')}?agent="
                                  f"{sid.get('agent')}",
                     "timeline": "/timeline", "memory": "/memory",
                     "context preview": f"/context?prompt={word}&budget=2000",
                     "served": "/served"}
            rows = asyncio.run(measure(base, login, a.n, pages))
        finally:
            d.proc.terminate()
            d.proc.wait(60)
    print(f"{st['units']:,} units, {st['sessions']:,} sessions; {a.n} requests per page "
          "after a warm-up, localhost TCP, cookie session")
    print(h.table(rows, ["page", "HTML", "CSS + JS", "p50 ms", "p90 ms", "p50 ÷ raw"]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
