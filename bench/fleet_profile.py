"""Where a fleet member's fixed cost per request goes (issue 14, the search/context p50
goal), beside a daemon in SQLite mode on the same corpus, in the same run.

`bench/fleet.py --part search`'s setup (one PostgreSQL, one fleet member and one SQLite
daemon watching the same generated corpus, both caught up), then:

- idle: each daemon left alone for `--idle` seconds; CPU time and wake-ups (voluntary
  context switches) per thread, from /proc/<pid>/task/*/schedstat and status;
- per request: `/v1/health` (no store, no index: the server's own path), `/v1/search`
  and `/v1/context` alternating between the daemons query by query, each timed, and
  the CPU each of the daemon's threads ran during it and in the 20 ms after (schedstat
  read before and after), and the PostgreSQL server's (its processes' ticks, /proc);
- each daemon's resident memory (VmRSS: anonymous + file-backed, and the peak) once both
  are quiet, and with `--rest S` again after the queries and S seconds at rest (the
  idle release runs 60 s after the last query: issue 11's idle RSS);
- threads are named by a `py-spy dump` of each daemon (its thread ids are the kernel's),
  when py-spy is on the PATH (`uvx py-spy`, or `pip install py-spy`); otherwise by id.

    .venv/bin/python bench/fleet_profile.py [--lines 10000 --queries 80 --idle 5]
"""

from __future__ import annotations

import argparse
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))
import harness as h  # noqa: E402
from fleet import fleet_env, wait_quiet  # noqa: E402
from pg_sample import server_cpu_s  # noqa: E402

from tests.pg_server import PgServer, find_bindir  # noqa: E402


def thread_stats(pid: int) -> dict[int, tuple[int, int]]:
    """tid -> (CPU ns, voluntary context switches) of each live thread."""
    out: dict[int, tuple[int, int]] = {}
    for t in Path(f"/proc/{pid}/task").iterdir():
        try:
            cpu = int((t / "schedstat").read_text().split()[0])
            vol = 0
            for line in (t / "status").read_text().splitlines():
                if line.startswith("voluntary_ctxt_switches"):
                    vol = int(line.split()[1])
            out[int(t.name)] = (cpu, vol)
        except (OSError, ValueError, IndexError):
            continue
    return out


def delta(a: dict[int, tuple[int, int]], b: dict[int, tuple[int, int]]
          ) -> dict[int, tuple[int, int]]:
    return {tid: (v[0] - a.get(tid, (0, 0))[0], v[1] - a.get(tid, (0, 0))[1])
            for tid, v in b.items()}


def thread_names(pid: int) -> dict[int, str]:
    """tid -> Python thread name, from `py-spy dump` (empty without py-spy)."""
    spy = shutil.which("py-spy")
    cmd = [spy] if spy else (["uvx", "py-spy"] if shutil.which("uvx") else None)
    if cmd is None:
        return {}
    try:
        out = subprocess.run([*cmd, "dump", "--pid", str(pid), "--nonblocking"],
                             capture_output=True, text=True, timeout=60).stdout
    except (OSError, subprocess.TimeoutExpired):
        return {}
    names = {}
    for m in re.finditer(r"Thread (0x[0-9A-Fa-f]+|\d+) \((?:\w+)\): \"([^\"]*)\"", out):
        tid = int(m.group(1), 0)
        names[tid] = m.group(2)
    return names


def rss_mb(pid: int, field: str = "VmRSS") -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) / 1024
    return 0.0


def rss_line(daemons: dict[str, h.Memoryd]) -> str:
    return ", ".join(
        f"{n} {rss_mb(d.proc.pid):.1f} MB ({rss_mb(d.proc.pid, 'RssAnon'):.1f} anonymous + "
        f"{rss_mb(d.proc.pid, 'RssFile'):.1f} file-backed; peak "
        f"{rss_mb(d.proc.pid, 'VmHWM'):.0f})" for n, d in daemons.items())


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--lines", type=int, default=10000)
    ap.add_argument("--queries", type=int, default=80)
    ap.add_argument("--idle", type=float, default=5.0)
    ap.add_argument("--rest", type=float, default=0.0,
                    help="then rest this long (idle_release lets go after 60 s) and "
                         "print RSS again")
    args = ap.parse_args(argv)
    print(f"load before: {os.getloadavg()}")
    server = PgServer(find_bindir())
    server.init()
    server.start()
    daemons: dict[str, h.Memoryd] = {}
    try:
        info = h.corpus(max(1, args.lines // 500), min(args.lines, 500))
        with tempfile.TemporaryDirectory() as tmp, h.short_dir() as sd:
            work = Path(tmp)
            url = server.url(server.create_database())
            for name, env in (("fleet", fleet_env(url, "a")), ("sqlite", {})):
                daemons[name] = h.Memoryd(work / name, Path(info.path), sd / f"{name}.sock",
                                          log_path=work / f"{name}.log", env=env)
            for name, d in daemons.items():
                d.wait_ready(120)
                st = d.wait_caught_up(3600)
                print(f"{name}: {st['units']:,} units caught up")
            quiet = wait_quiet(daemons)
            print("quiet (under 5% of a core for 2 s) after caught up: " + ", ".join(
                f"{n} {s:.0f}s" for n, s in quiet.items()))
            names = {n: thread_names(d.proc.pid) for n, d in daemons.items()}

            def label(n: str, tid: int) -> str:
                return names[n].get(tid, f"tid {tid}")

            print(f"RSS once quiet: {rss_line(daemons)}")
            print(f"\nidle {args.idle:.0f} s each (CPU ms / wake-ups per second, by thread)")
            for n, d in daemons.items():
                a, pg0 = thread_stats(d.proc.pid), server_cpu_s(server)
                time.sleep(args.idle)
                b, pg1 = thread_stats(d.proc.pid), server_cpu_s(server)
                rows = sorted(delta(a, b).items(), key=lambda kv: -kv[1][0])
                tot = sum(v[0] for _, v in rows)
                print(f"  {n}: {tot / 1e6 / args.idle:.2f} ms CPU/s in all; PostgreSQL's "
                      f"server meanwhile {(pg1 - pg0) * 1000 / args.idle:.2f} ms/s")
                for tid, (cpu, vol) in rows:
                    if cpu or vol:
                        print(f"    {label(n, tid):34s} {cpu / 1e6 / args.idle:7.2f} "
                              f"{vol / args.idle:7.1f}")

            gen = h.TextGen(info.seed)
            qs = gen.queries(random.Random(11), args.queries)
            rng = random.Random(5)
            times: dict[tuple[str, str], list[float]] = defaultdict(list)
            pg: dict[tuple[str, str], float] = defaultdict(float)  # PostgreSQL's CPU
            cpu: dict[tuple[str, str], dict[int, list[int]]] = defaultdict(
                lambda: defaultdict(list))
            for i, (_cls, q, mode) in enumerate(qs):
                cwd = f"/bench/proj{rng.randrange(13):02d}"
                order = list(daemons.items())
                if i % 2:
                    order.reverse()
                for name, d in order:
                    for what, call in (
                            ("health", lambda d=d: d.client.health()),
                            ("search", lambda d=d, q=q, mode=mode: d.client.search(
                                query=q, mode=mode, max_results=10)),
                            ("context", lambda d=d, q=q, cwd=cwd: d.client.request(
                                "POST", "/v1/context", {"query": q, "cwd": cwd,
                                                        "budget_tokens": 2000}))):
                        if i == 0:
                            call()  # warm
                        time.sleep(0.02)  # what the last request left behind settles
                        a, pg0 = thread_stats(d.proc.pid), server_cpu_s(server)
                        t = time.perf_counter()
                        call()
                        times[(name, what)].append(time.perf_counter() - t)
                        time.sleep(0.02)  # what the request left to do after answering
                        pg[(name, what)] += server_cpu_s(server) - pg0
                        for tid, (c, vol) in delta(a, thread_stats(d.proc.pid)).items():
                            cpu[(name, what)][tid].append(c)
                            cpu[(name, what + " wakeups")][tid].append(vol)
            print(f"\n{h.machine()}")
            print(f"{len(qs)} queries; wall p50 / p99, then CPU ms per request by thread "
                  "(mean; wake-ups mean)")
            for what in ("health", "search", "context"):
                for n in daemons:
                    s = h.summary(times[(n, what)])
                    per = cpu[(n, what)]
                    tot = sum(sum(v) for v in per.values()) / len(times[(n, what)])
                    print(f"  {what:8s} {n:7s} p50 {h.ms(s['p50']):>10s} p99 "
                          f"{h.ms(s['p99']):>10s}  CPU {tot / 1e6:6.2f} ms; PostgreSQL's "
                          f"{pg[(n, what)] * 1000 / len(times[(n, what)]):.2f} ms")
                    wk = cpu[(n, what + " wakeups")]
                    for tid, v in sorted(per.items(), key=lambda kv: -sum(kv[1])):
                        m = sum(v) / len(v) / 1e6
                        w = sum(wk.get(tid, [0])) / max(1, len(wk.get(tid, [0])))
                        if m >= 0.05 or w >= 0.5:
                            print(f"      {label(n, tid):32s} {m:7.2f} ms {w:6.1f}")
            if args.rest:
                time.sleep(args.rest)
                print(f"RSS after the queries and {args.rest:.0f} s at rest: "
                      f"{rss_line(daemons)}")
            print(f"load after: {os.getloadavg()}")
    finally:
        for d in daemons.values():
            d.stop()
        server.destroy()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
