"""Memory and CPU of a daemon at rest on a big store, and how gently it starts on one.

Uses the store `bigstore.py` builds (cached, same flags), copied for each run:

  first start   memoryd with its default settings on the copied store (a history whose
                sessions are all idle and unsummarized): every `--sample-s` seconds for
                `--first-start-s`, the summary jobs waiting (pending + running), the
                process's CPU share and RSS. What the idle sweep queues is paced
                (`memoryd.summarize.triggers.SWEEP_BATCH`), so the waiting jobs stay a handful.
  at rest       memoryd with automatic summaries off (`MEMORYD_AUTO_SUMMARY=0`, so the
                backlog above does not run), once caught up: `--warm` searches and
                `/v1/context` requests (so whatever loads on first use has loaded), then
                `--idle-s` seconds with no request: CPU share over that window, RSS (VmRSS,
                split into anonymous and file-backed) after the searches, after the
                contexts and the rest, and the peak (VmHWM).
  raw baseline  in the same run, a bare process that opens the same SQLite database and
                tantivy index (stdlib sqlite3 + tantivy), runs the same searches on the
                bare index, then rests: its RSS and CPU over the same window.
  threads       memoryd's threads over the rest: wake-ups/s (context switches) and CPU
                share each, named by py-spy when it is installed: what still polls.

    .venv/bin/python bench/idle.py --units 200000
    .venv/bin/python bench/idle.py --quick          # 30,000 units, shorter windows
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import signal
import statistics
import subprocess
import sys
import textwrap
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bigstore  # noqa: E402
import harness as h  # noqa: E402
import memprobe  # noqa: E402

from memoryd.paths import resolve_paths  # noqa: E402

TICK = os.sysconf("SC_CLK_TCK")


def _stat(pid: int | str) -> list[str]:
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()


def cpu_s(pid: int) -> float:
    """CPU seconds of a process and of its children: its own threads, the children it
    reaped (`cutime`/`cstime`) and the ones still running with their own descendants (a
    backfill's index writer runs in a child process: memoryd.index.bulk)."""
    f = _stat(pid)
    return sum(int(x) for x in f[11:15]) / TICK + children_cpu_s(pid)


def children_cpu_s(pid: int) -> float:
    """CPU seconds of a process's live descendants (each with its reaped children)."""
    kids: dict[int, list[tuple[int, int]]] = {}
    for p in Path("/proc").iterdir():
        if p.name.isdigit():
            try:
                f = _stat(p.name)
            except OSError:
                continue
            kids.setdefault(int(f[1]), []).append((int(p.name), sum(int(x) for x in f[11:15])))
    total, todo = 0, [pid]
    while todo:
        for child, ticks in kids.get(todo.pop(), []):
            total += ticks
            todo.append(child)
    return total / TICK


def mem_mb(pid: int, key: str = "VmRSS") -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1]) / 1024
    return 0.0


def threads(pid: int) -> dict[str, tuple[str, int, float]]:
    """Each thread's name (py-spy's when it can tell, else the OS's), context switches
    (wake-ups) and CPU seconds."""
    out = {}
    for t in Path(f"/proc/{pid}/task").iterdir():
        try:
            st = (t / "status").read_text()
            f = (t / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        sw = sum(int(ln.split()[1]) for ln in st.splitlines() if "ctxt_switches" in ln)
        out[t.name] = ((t / "comm").read_text().strip(), sw, (int(f[11]) + int(f[12])) / TICK)
    return out


def py_names(pid: int) -> dict[str, str]:
    """Thread id -> Python thread name, from py-spy if it is installed (dev extra)."""
    spy = Path(sys.executable).parent / "py-spy"
    if not spy.exists():
        return {}
    r = subprocess.run([str(spy), "dump", "--pid", str(pid)], capture_output=True, text=True)
    return {ln.split()[1]: ln.split('"')[1] for ln in r.stdout.splitlines()
            if ln.startswith("Thread ") and '"' in ln}


def wakeups(pid: int, before: dict, after: dict, seconds: float) -> str:
    """Per thread, wake-ups/s and CPU share over the window (what polls while idle)."""
    names = py_names(pid)
    rows = []
    for tid, (comm, sw, cpu) in after.items():
        b = before.get(tid, (comm, 0, 0.0))
        w = (sw - b[1]) / seconds
        if w >= 0.05:
            rows.append((w, [names.get(tid, comm), f"{w:.2f}",
                             f"{100 * (cpu - b[2]) / seconds:.3f}"]))
    rows.sort(key=lambda r: -r[0])
    return h.table([r for _, r in rows], ["thread", "wake-ups/s", "CPU %"])


def mem_split(pid: int) -> str:
    return (f"{mem_mb(pid):.0f} ({mem_mb(pid, 'RssAnon'):.0f} + "
            f"{mem_mb(pid, 'RssFile'):.0f})")


def files_mb(pid: int, db: Path, index: Path) -> tuple[float, float]:
    """Resident MB of a process's mappings of the database file (its -shm: SQLite's
    readers read the file through their page caches) and of the index files."""
    out = [0, 0]
    which = -1
    with open(f"/proc/{pid}/smaps") as f:
        for line in f:
            head = line.split(maxsplit=5)
            if "-" in head[0] and not head[0].endswith(":"):
                path = head[5].strip() if len(head) > 5 else ""
                which = (0 if path.startswith(str(db)) else
                         1 if path.startswith(str(index) + "/") else -1)
            elif which >= 0 and head[0] == "Rss:":
                out[which] += int(head[1])
    return out[0] / 1024, out[1] / 1024


def fresh_copy(dir: Path, name: str, memory: Path | None = None) -> Path:
    """The built store copied into a home of its own; `memory`: its MEMORY.md."""
    home = dir / name
    shutil.rmtree(home, ignore_errors=True)
    paths = resolve_paths(home)
    paths.ensure()
    built = resolve_paths(dir / "home")
    shutil.copyfile(built.db, paths.db)
    shutil.copytree(built.data_dir / "index", paths.data_dir / "index")
    if memory is not None:
        paths.memory_dir.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(memory, paths.memory_dir / "MEMORY.md")
    return home


def first_start(args: argparse.Namespace, dir: Path) -> None:
    home = fresh_copy(dir, "idle-first")
    src = dir / "empty-src"
    src.mkdir(exist_ok=True)
    with h.short_dir() as sd:
        d = h.Memoryd(home, src, sd / "m.sock", log_path=dir / "idle-first.log")
        try:
            d.wait_ready(300)
            pid = d.proc.pid
            most, cpu, t_end = 0, [], time.monotonic() + args.first_start_s
            done = 0
            while time.monotonic() < t_end:
                c0, t0 = cpu_s(pid), time.monotonic()
                time.sleep(args.sample_s)
                cpu.append(100 * (cpu_s(pid) - c0) / (time.monotonic() - t0))
                st = d.status() or {}
                jobs = (st.get("summaries") or {}).get("jobs") or {}
                waiting = int(jobs.get("pending") or 0) + int(jobs.get("running") or 0)
                done = int(jobs.get("done") or 0)
                most = max(most, waiting)
            print(f"first start, {args.first_start_s:.0f} s on the copied store: summary jobs "
                  f"waiting at most {most}, done {done}; CPU "
                  f"mean {sum(cpu) / len(cpu):.1f}%, max {max(cpu):.1f}% of one core; "
                  f"RSS {mem_mb(pid):.0f} MB")
        finally:
            d.stop()
            shutil.rmtree(home, ignore_errors=True)


RAW = textwrap.dedent("""
    import sqlite3, sys, time, tantivy
    sys.path.insert(0, {root!r})
    from memoryd.index.schema import ANALYZER, build_analyzer, build_schema
    from memoryd.index.query import text_query
    from memoryd.recall.retrieval import plan_query
    db = sqlite3.connect({db!r})
    db.execute("SELECT count(*) FROM sessions").fetchone()
    ix = tantivy.Index.open({ix!r})
    ix.register_tokenizer(ANALYZER, build_analyzer())
    schema, an = build_schema(), build_analyzer()
    for q, mode in {queries!r}:
        s = ix.searcher()
        query = text_query(schema, an, s, plan_query(q, mode).terms, mode)
        if query is not None:
            s.search(query, 15)
    print("ready", flush=True)
    time.sleep(3600)
""")


def at_rest(args: argparse.Namespace, dir: Path) -> None:
    home = fresh_copy(dir, f"idle-rest-{os.getpid()}", args.memory)
    src = dir / "empty-src"
    src.mkdir(exist_ok=True)
    gen = h.TextGen(args.seed)
    queries = [(q, m) for _, q, m in gen.queries(random.Random(args.seed * 101), args.warm)]
    paths = resolve_paths(home)
    raw = subprocess.Popen(
        [sys.executable, "-c", RAW.format(root=str(h.ROOT), db=str(paths.db),
                                          ix=str(paths.data_dir / "index" / "tantivy"),
                                          queries=queries)],
        stdout=subprocess.PIPE, text=True)
    with h.short_dir() as sd:
        d = h.Memoryd(home, src, sd / "m.sock", log_path=dir / f"idle-rest-{os.getpid()}.log",
                      env={"MEMORYD_AUTO_SUMMARY": "0"})
        try:
            d.wait_ready(300)
            st = d.wait_caught_up(900)
            pid = d.proc.pid
            db, ix = paths.db.resolve(), (paths.data_dir / "index").resolve()

            def mem() -> str:
                return "{} (db {:.0f}, index {:.0f})".format(mem_split(pid), *files_mb(pid, db, ix))

            after_start = mem()
            for q, mode in queries:
                d.client.search(query=q, mode=mode)
            searched = mem()
            for q, _ in queries:  # the first one loads the tokenizer (cl100k_base)
                d.client.request("POST", "/v1/context", {"query": q, "cwd": "/bench/proj01"})
            contexts = mem()
            # what the embed worker put off while the requests came (it embeds only in a
            # quiet moment: MEMORY.md's entries, `--memory`) it does once they stop: not rest
            while not (d.client.status().get("embed") or {}).get("caught_up", True):
                time.sleep(1)
            assert raw.stdout is not None
            raw.stdout.readline()  # the raw side is ready too
            c0, r0, t0 = cpu_s(pid), cpu_s(raw.pid), time.monotonic()
            th0 = threads(pid)
            time.sleep(args.idle_s)
            el = time.monotonic() - t0
            th1 = threads(pid)
            cpu, raw_cpu = 100 * (cpu_s(pid) - c0) / el, 100 * (cpu_s(raw.pid) - r0) / el
            rows = [["memoryd (auto summaries off)", after_start, searched, contexts, mem(),
                     f"{mem_mb(pid, 'VmHWM'):.0f}", f"{cpu:.2f}"],
                    ["raw: sqlite3 + tantivy, same searches", "", "", "", mem_split(raw.pid),
                     f"{mem_mb(raw.pid, 'VmHWM'):.0f}", f"{raw_cpu:.2f}"]]
            print(f"at rest on {st['units']:,} units; RSS in MB as total (anonymous + "
                  "file-backed: mapped index and libraries; of it the database file's and "
                  "the index's mapped pages); the idle release ran "
                  f"{d.client.status()['memory']['idle_releases']}x:")
            print(h.table(rows, ["", "caught up", f"after {len(queries)} searches",
                                 f"+ {len(queries)} contexts",
                                 f"{args.idle_s:.0f} s at rest",
                                 "peak", "CPU at rest (%)"]))
            print(f"memoryd's threads over the {args.idle_s:.0f} s at rest:")
            print(wakeups(pid, th0, th1, el))
        finally:
            d.stop()
            raw.kill()
            raw.wait()
            shutil.rmtree(home, ignore_errors=True)


def snapshot(d: h.Memoryd, probe: Path | None, home: Path, label: str) -> dict:
    """RSS (total, anonymous, file-backed), peak and the smaps kinds of a running daemon;
    with `probe` (bench/memprobe.py), its own report of malloc arenas and Python objects."""
    pid = d.proc.pid
    out = {"label": label, "rss": mem_mb(pid), "anon": mem_mb(pid, "RssAnon"),
           "file": mem_mb(pid, "RssFile"), "hwm": mem_mb(pid, "VmHWM"),
           "kinds": memprobe.smaps_kinds(pid, str(resolve_paths(home).data_dir / "index"))}
    if probe is not None:
        n = len(probe.read_text().splitlines()) if probe.exists() else 0
        os.kill(pid, signal.SIGUSR2)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if probe.exists() and len(probe.read_text().splitlines()) > n:
                out["probe"] = json.loads(probe.read_text().splitlines()[-1])
                break
            time.sleep(0.2)
    return out


def show(snaps: list[dict]) -> None:
    kinds = sorted({k for s in snaps for k in s["kinds"]})
    rows = [[s["label"], f"{s['rss']:.0f}", f"{s['anon']:.0f}", f"{s['file']:.0f}",
             f"{s['hwm']:.0f}", *(f"{s['kinds'].get(k, 0):.0f}" for k in kinds)]
            for s in snaps]
    print(h.table(rows, ["", "RSS", "anon", "file", "peak", *kinds]))
    for s in snaps:
        pr = s.get("probe")
        if not pr:
            continue
        m = pr["malloc"]
        print(f"  {s['label']}: malloc {m['arenas']} arenas hold {m['system_mb']} MB, "
              f"{m['free_mb']} MB of it free; {pr['gc_objects']:,} Python objects, "
              f"{pr['threads']} threads" + (f"; traced {pr['traced_mb']} MB"
                                             if "traced_mb" in pr else ""))
        print("    arenas (MB held, free): " + ", ".join(f"{a}/{b}" for a, b in m["each"]))
        for site, mb, count in pr.get("top", [])[:12]:
            print(f"    {mb:7.2f} MB {count:8,}  {site}")


def warm_and_rest(d: h.Memoryd, queries: list, idle_s: float) -> tuple[float, float]:
    """The searches and contexts, then the rest; their median ms (wall, over the socket)."""
    ms: tuple[list[float], list[float]] = ([], [])
    for q, mode in queries:
        t0 = time.perf_counter()
        d.client.search(query=q, mode=mode)
        ms[0].append(1000 * (time.perf_counter() - t0))
    for q, _ in queries:
        t0 = time.perf_counter()
        d.client.request("POST", "/v1/context", {"query": q, "cwd": "/bench/proj01"})
        ms[1].append(1000 * (time.perf_counter() - t0))
    time.sleep(idle_s)
    return statistics.median(ms[0]), statistics.median(ms[1])


def self_backfill(args: argparse.Namespace) -> None:
    """A fresh home that backfills a generated corpus itself, then the same home
    restarted (a built store), in the same run: RSS once caught up, after a rest with no
    query, after searches, contexts and a rest."""
    info = h.corpus(args.backfill_files, args.backfill_lines, args.seed)
    gen = h.TextGen(args.seed)
    queries = [(q, m) for _, q, m in gen.queries(random.Random(args.seed * 101), args.warm)]
    dir = h.OUT / f"idle-backfill-{os.getpid()}"
    shutil.rmtree(dir, ignore_errors=True)
    home = dir / "home"
    probe = dir / "probe.jsonl" if args.probe else None
    py = [str(Path(__file__).parent / "memprobe.py"), str(probe)] if probe else []
    env = {"MEMORYD_AUTO_SUMMARY": "0", **dict(kv.split("=", 1) for kv in args.env)}
    if args.tracemalloc:
        py = ["-X", "tracemalloc=1", *py]
    snaps = []
    try:
        for run in ("self-backfill", "restarted")[:1 if args.no_restart else 2]:
            with h.short_dir() as sd:
                d = h.Memoryd(home, Path(info.path), sd / "m.sock",
                              log_path=dir / f"{run}.log", env=env, python_args=py)
                try:
                    d.wait_ready(300)
                    t0 = time.monotonic()
                    st = d.wait_caught_up(1800)
                    print(f"{run}: caught up on {st['units']:,} units in "
                          f"{time.monotonic() - t0:.0f} s", flush=True)
                    snaps.append(snapshot(d, probe, home, f"{run}: caught up"))
                    time.sleep(args.idle_s)
                    snaps.append(snapshot(d, probe, home,
                                          f"{run}: {args.idle_s:.0f} s rest, no query"))
                    c0, t0 = cpu_s(d.proc.pid), time.monotonic()
                    search_ms, context_ms = warm_and_rest(d, queries, args.idle_s)
                    snaps.append(snapshot(d, probe, home, f"{run}: {len(queries)} searches "
                                          f"+ contexts, {args.idle_s:.0f} s rest"))
                    print(f"  CPU over the warm-up and rest: "
                          f"{100 * (cpu_s(d.proc.pid) - c0) / (time.monotonic() - t0):.2f}%; "
                          f"search p50 {search_ms:.2f} ms, context p50 {context_ms:.2f} ms "
                          "(the first ones load what they need)")
                finally:
                    d.stop()
    finally:
        if not args.keep:
            shutil.rmtree(dir, ignore_errors=True)
    print(f"self-backfill of {info.lines:,} lines, then the same home restarted; RSS in MB "
          "by kind (smaps):")
    show(snaps)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--units", type=int, default=200_000)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--quick", action="store_true", help="30,000 units, shorter windows")
    p.add_argument("--first-start-s", type=float, default=180.0)
    p.add_argument("--sample-s", type=float, default=5.0)
    p.add_argument("--idle-s", type=float, default=90.0,
                   help="rest after the last request (memoryd lets go of what queries loaded "
                        "60 s after the last one: memoryd.runtime.idle_release)")
    p.add_argument("--warm", type=int, default=50, help="searches and contexts before rest")
    p.add_argument("--skip-first-start", action="store_true")
    p.add_argument("--self-backfill", action="store_true",
                   help="only: a fresh daemon backfills --backfill-files x --backfill-lines "
                        "itself, then the same home restarted (RSS by kind at each step)")
    p.add_argument("--backfill-files", type=int, default=400)
    p.add_argument("--backfill-lines", type=int, default=500)
    p.add_argument("--probe", action="store_true",
                   help="with --self-backfill: run the daemon under bench/memprobe.py "
                        "(malloc arenas, Python objects)")
    p.add_argument("--tracemalloc", action="store_true",
                   help="with --probe: and under tracemalloc (slow; where Python's bytes are)")
    p.add_argument("--keep", action="store_true", help="keep the self-backfill's home")
    p.add_argument("--no-restart", action="store_true",
                   help="with --self-backfill: no restart (quick A/Bs of what a backfill "
                        "leaves; figures to report keep the restarted baseline)")
    p.add_argument("--env", action="append", default=[], metavar="K=V",
                   help="with --self-backfill: in the daemon's environment (e.g. glibc's "
                        "MALLOC_ARENA_MAX=2), repeatable")
    p.add_argument("--memory", type=Path,
                   help="a MEMORY.md for the daemon at rest (with embeddings on, the worker "
                        "embeds its entries once the requests stop, before the rest is "
                        "measured, and looks at the file every 5 s)")
    p.add_argument("--store", type=Path,
                   help="a store bigstore.py built (its directory), instead of --units")
    args = p.parse_args(argv)
    if args.quick:
        args.units, args.first_start_s, args.idle_s = 30_000, 60.0, 75.0
    print(f"idle benchmark: {h.machine()}")
    if args.self_backfill:
        self_backfill(args)
        return 0
    dir = args.store or bigstore.store_dir(args.units, args.seed)
    if args.store is None:
        bigstore.build(args.units, args.seed, dir)
    if not args.skip_first_start:
        first_start(args, dir)
    at_rest(args, dir)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
