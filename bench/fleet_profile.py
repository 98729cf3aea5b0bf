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

- the catch-up first: each daemon's CPU by thread from its start to caught up and from
  there to quiet (the work after a backfill), the whole process's, PostgreSQL's, and
  what the index did (`--queries 0` stops there).

    .venv/bin/python bench/fleet_profile.py [--lines 10000 --queries 80 --idle 5]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import random
import re
import shutil
import subprocess
import sys
import time
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))
import harness as h  # noqa: E402
from fleet_pair import QUIET, alternating, pair, wait_quiet  # noqa: E402
from pg_sample import server_cpu_s  # noqa: E402


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
    spy = shutil.which("py-spy") or shutil.which("py-spy", path=str(Path(sys.executable).parent))
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


def proc_stat_cpu_s(pid: int) -> float:
    """CPU seconds of the whole process, threads that ended included (utime + stime)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def thread_comms(pid: int) -> dict[int, str]:
    out = {}
    for t in Path(f"/proc/{pid}/task").iterdir():
        with contextlib.suppress(OSError):
            out[int(t.name)] = (t / "comm").read_text().strip()
    return out


def catch_up(daemons: dict[str, h.Memoryd],
             caught: dict[str, tuple[float, dict[int, tuple[int, int]]]]) -> None:
    """Where each daemon's CPU went from its start to caught up, and from caught up to
    quiet (the background work after a backfill: summaries, one-liners, and in fleet
    mode their changes coming back through the feed), by thread (the kernel's name; a
    thread that ended is only in the whole process's figure), and what the index did."""
    print("\ncatch-up CPU by thread, s: start -> caught up, caught up -> quiet")
    for n, d in daemons.items():
        total0, t0 = caught[n]
        t1, total1 = thread_stats(d.proc.pid), proc_stat_cpu_s(d.proc.pid)
        comms = {**thread_comms(d.proc.pid), **thread_names(d.proc.pid)}
        by: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0])
        for tid, (cpu, _vol) in t1.items():
            before = t0.get(tid, (0, 0))[0]
            by[comms.get(tid, str(tid))][0] += before / 1e9
            by[comms.get(tid, str(tid))][1] += (cpu - before) / 1e9
        print(f"  {n}: whole process {total0:.1f} s to caught up, "
              f"{total1 - total0:.1f} s more until quiet")
        for name, (a, b) in sorted(by.items(), key=lambda kv: -sum(kv[1])):
            if a + b >= 0.05:
                print(f"    {name:24s} {a:7.2f} {b:7.2f}")
        st = d.client.status()
        ix = st.get("index", {})
        feed = ix.get("feed") or {}
        print(f"    index: {ix.get('units')} units, {ix.get('commits')} commits"
              + (f"; feed: {feed.get('changes')} changes read in {feed.get('applies')} "
                 f"applies, {feed.get('indexed')} documents indexed; the applies' CPU by "
                 f"stage {feed.get('cpu_s')}" if feed else ""))


def feed_rows(url: str) -> None:
    """What the change feed carried: its rows, the units they name, by op."""
    import psycopg

    with psycopg.connect(url) as conn:
        rows = conn.execute("SELECT op, count(*), count(DISTINCT unit_id)"
                            " FROM memoryd_bench.changes GROUP BY op ORDER BY op").fetchall()
        units = conn.execute("SELECT count(*) FROM memoryd_bench.units").fetchone()[0]
    print(f"  the change feed: {units} units; " + ", ".join(
        f"{op} {n} rows ({d} units)" for op, n, d in rows))


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
    with pair(args.lines) as (server, daemons, info):
        caught = {n: (proc_stat_cpu_s(d.proc.pid), thread_stats(d.proc.pid))
                  for n, d in daemons.items()}
        pg_caught = server_cpu_s(server)
        quiet = wait_quiet(daemons)
        print(f"quiet ({QUIET}) {max(quiet.values()):.0f} s after caught up")
        catch_up(daemons, caught)
        print(f"  PostgreSQL's server (both daemons' share is the fleet member's): "
              f"{pg_caught:.1f} s to caught up, {server_cpu_s(server) - pg_caught:.1f} s "
              "more until quiet")
        feed_rows(server.bench_url)
        if not args.queries:  # --queries 0: the catch-up alone
            return 0
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
        times: dict[tuple[str, str], list[float]] = defaultdict(list)
        pg: dict[tuple[str, str], float] = defaultdict(float)  # PostgreSQL's CPU
        cpu: dict[tuple[str, str], dict[int, list[int]]] = defaultdict(
            lambda: defaultdict(list))
        for i, name, d, calls in alternating(daemons, qs):
            for what, call in (("health", lambda d=d: d.client.health()), *calls):
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
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
