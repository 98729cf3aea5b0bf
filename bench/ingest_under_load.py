"""Ingest under query load: backfill rate with 64 clients hammering context and search,
against the unloaded rate measured in the same run (the baseline), plus context latency
p50/p99 under that load and how many queries were turned away (503 + Retry-After).

Each phase starts memoryd on a fresh home over the same generic-JSONL corpus and times
spawn -> caught_up; the loaded phase runs the clients (threads, each with its own
MemorydClient over the Unix socket, alternating POST /v1/context and POST /v1/search)
for the whole backfill. Issue 8 asks for loaded >= 0.5 x unloaded.

    .venv/bin/python bench/ingest_under_load.py            # 30 x 2500 lines (75k)
    .venv/bin/python bench/ingest_under_load.py --quick    # 10 x 1000 lines
"""

from __future__ import annotations

import argparse
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import harness as h  # noqa: E402

from memoryd.client import ApiError  # noqa: E402

WORDS = ["migration", "quokka", "deploy", "cache", "部署", "数据库", "latency", "retry"]


def backfill(src: Path, clients: int, log=print) -> dict[str, float]:
    with h.short_dir() as d:
        home = d / "home"
        md = h.Memoryd(home, src, d / "m.sock")
        with md:
            md.wait_ready()
            t0 = time.perf_counter()
            stop = threading.Event()
            lat: list[float] = []
            slat: list[float] = []
            busy = [0]
            errors: list[str] = []

            def hammer(i: int) -> None:
                from memoryd.client import MemorydClient

                c = MemorydClient(md.sock, timeout=30)
                n = i
                while not stop.is_set():
                    q = WORDS[n % len(WORDS)]
                    n += 1
                    t = time.perf_counter()
                    try:
                        if n % 2:
                            c.request("POST", "/v1/context",
                                      {"query": q, "budget_tokens": 1500})
                        else:
                            c.search(query=q, max_results=10)
                        (lat if n % 2 else slat).append(time.perf_counter() - t)
                    except ApiError as e:
                        if e.status == 503:
                            busy[0] += 1
                            time.sleep(0.2)
                        else:
                            errors.append(str(e))
                    except OSError as e:
                        errors.append(repr(e))

            threads = [threading.Thread(target=hammer, args=(i,), daemon=True)
                       for i in range(clients)]
            for t in threads:
                t.start()
            st = md.wait_caught_up(timeout=1800, progress=15, log=log)
            secs = time.perf_counter() - t0
            stop.set()
            limiter = (md.status() or {}).get("queries") or {}
            for t in threads:
                t.join(35)
    out = {"units": st["units"], "secs": secs, "rate": st["units"] / secs,
           "queries": len(lat), "searches": len(slat), "busy_503": busy[0],
           "errors": len(errors), "limiter": limiter}
    for name, xs in (("ctx", lat), ("search", slat)):
        if xs:
            out[f"{name}_p50_ms"] = h.percentile(xs, 50) * 1000
            out[f"{name}_p99_ms"] = h.percentile(xs, 99) * 1000
    if errors:
        log(f"  errors (first 3): {errors[:3]}")
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--files", type=int, default=30)
    ap.add_argument("--lines", type=int, default=2500)
    ap.add_argument("--clients", type=int, default=64)
    ap.add_argument("--quick", action="store_true")
    a = ap.parse_args()
    if a.quick:
        a.files, a.lines = 10, 1000
    info = h.corpus(a.files, a.lines)
    print(h.machine())
    print(f"corpus: {info.files} files, {info.lines:,} lines, {info.bytes / 1e6:.0f} MB")
    print("unloaded backfill (baseline) ...")
    base = backfill(Path(info.path), 0)
    print(f"backfill with {a.clients} clients on context + search ...")
    load = backfill(Path(info.path), a.clients)
    rows = [["unloaded", f"{base['rate']:,.0f}", f"{base['secs']:.1f}", "-", "-", "-", "-",
             "-", "-"],
            [f"{a.clients} clients", f"{load['rate']:,.0f}", f"{load['secs']:.1f}",
             f"{load.get('ctx_p50_ms', 0):.0f}", f"{load.get('ctx_p99_ms', 0):.0f}",
             f"{load.get('search_p50_ms', 0):.0f}", f"{load.get('search_p99_ms', 0):.0f}",
             f"{load['queries']}+{load['searches']}", str(load["busy_503"])]]
    print(h.table(rows, ["backfill", "units/s", "s", "ctx p50 ms", "ctx p99 ms",
                         "search p50", "search p99", "answered", "503s"]))
    lim = load["limiter"]
    if lim:
        print(f"limiter: {lim['concurrency']} running / {lim['backlog']} waiting / "
              f"{lim['max_wait_s']:g} s max wait; admitted {lim['admitted']}, mean wait "
              f"{lim['mean_wait_ms']:.0f} ms; turned away {lim['rejected']} "
              f"({lim['rejected_after_waiting']} after waiting)")
    share = load["rate"] / base["rate"]
    print(f"loaded rate = {share:.2f} x unloaded (issue 8 wants >= 0.50); "
          f"{load['errors']} errors other than 503")
    return 0 if share >= 0.5 and not load["errors"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
