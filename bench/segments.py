"""Search cost vs the tantivy index's segment count on a large store (issue 11 items 1, 5).

Every search pays per segment (a scorer per term per segment, fast-field readers), and the
segment count follows from how the index was written: the writer's heap (a segment is
flushed when the arena fills), how often it commits (each commit ends a segment), and
tantivy's default LogMergePolicy (tantivy-py 0.27 has no merge API). This rebuilds memoryd's
index of an existing store (bench/bigstore.py's, read only: its database is never written)
in a few ways and measures each variant in the same run:

  as-built   the store's index as bigstore.py built it (a copy): 32 MB, a commit per 100k
  reindex    memoryd's own rebuild path, as `memoryctl reindex` or a missing index runs it:
             SearchIndex.open on an empty directory, its Indexer thread (niced, a commit
             per COMMIT_EVERY_S), WRITER_HEAP as given (32 MB today)
  h<MB>      memoryd's documents (`unit_docs`) through SearchIndex.writer() at a heap of
             <MB> MB (WRITER_HEAP set in the builder process), one commit at the end, then
             wait_merging_threads (SearchIndex.caught_up); `h<MB>c<N>` commits every N units

Each build runs alone in a child process under `nice -n 10`: wall time, CPU (user + sys,
all threads, from wait4) and peak RSS (ru_maxrss) of that process. Then per variant:
segments (and their sizes in docs), index bytes, and the search cost, alternating the
variants per query in a rotating order (each query first run once untimed on every
variant, as bench/search.py does):
  bare     bare tantivy: the query memoryd builds, top 15, unit ids read (search.py's raw)
  socket   POST /v1/search to a memoryd serving a copy of the database with that variant's
           index (one daemon per variant, all up together; --no-socket skips them)
With --rg, `rg -i -F -c` reads the store's transcripts before each query's timed runs (the
searches then start with cold CPU caches, as after any big read: bench/search.py's rg).

    .venv/bin/python bench/segments.py --variants h512,h128,reindex --build-only
    .venv/bin/python bench/segments.py --variants as-built,reindex,h128,h512
Everything goes under --work (default $MEMORYD_BENCH_OUT/segs-<pid>); builds already there
(build.json) are reused; --clean deletes the work directory at the end.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import sqlite3
import statistics
import subprocess
import sys
import time
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import harness as h  # noqa: E402
from bigstore import bare_tantivy  # noqa: E402
from search import do_bare  # noqa: E402

from memoryd.paths import resolve_paths  # noqa: E402
from memoryd.retrieval import plan_query  # noqa: E402

RG = shutil.which("rg")
STORE = h.OUT / f"search-g{h.GEN_VERSION}-1000000-s1-ol"


# -- the builder (a child process) ----------------------------------------------------------

def build_child(db: Path, root: Path, variant: str) -> dict:
    """Build `variant`'s index under `root` from the database `db` (read only)."""
    import memoryd.index as mi
    from memoryd.index import SearchIndex
    from memoryd.index.indexer import UNIT_ROWS, unit_docs

    heap_mb, commit_every = parse_variant(variant)
    mi.WRITER_HEAP = heap_mb * 1_000_000
    t0, c0 = time.perf_counter(), time.thread_time()
    ix = SearchIndex(root, db)
    if variant.startswith("reindex"):  # memoryd's own path: its Indexer thread rebuilds
        ix.open(lambda _: None)
        while ix.state != "ready":
            time.sleep(0.2)
        thread = ix._indexer._thread
        ix.close()
        thread.join()  # the writer's merges end with it (a daemon thread: not at exit)
    else:
        root.mkdir(parents=True, exist_ok=True)
        ix.reset()
        w = ix.writer()
        conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
        conn.row_factory = sqlite3.Row
        last = n = committed = 0
        while rows := conn.execute(UNIT_ROWS + "WHERE u.id > ? ORDER BY u.id LIMIT 5000",
                                   (last,)).fetchall():
            for d in unit_docs(rows):
                w.add_document(d)
            last, n = rows[-1]["unit_id"], n + len(rows)
            if commit_every and n - committed >= commit_every:
                w.commit()
                committed = n
        w.commit()
        ix.caught_up()  # wait_merging_threads, the index marked complete
        conn.close()
    return {"wall_s": time.perf_counter() - t0, "main_thread_cpu_s": time.thread_time() - c0}


def parse_variant(v: str) -> tuple[int, int]:
    """(heap MB, commit every N units; 0: at the end) of a variant name."""
    if v.startswith("reindex"):
        return int(v[7:] or 32), 0
    heap, _, every = v[1:].partition("c")
    return int(heap), int(every or 0)


def build(variant: str, db: Path, vdir: Path) -> dict:
    """Build one variant in a child under nice 10; its figures (cached in build.json)."""
    out = vdir / "build.json"
    if out.exists():
        return json.loads(out.read_text())
    shutil.rmtree(vdir, ignore_errors=True)
    vdir.mkdir(parents=True)
    cmd = ["nice", "-n", "10", sys.executable, __file__, "--child", variant, "--db", str(db),
           "--work", str(vdir)]
    t0 = time.perf_counter()
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)
    _, status, ru = os.wait4(p.pid, 0)
    wall = time.perf_counter() - t0
    text = p.stdout.read() if p.stdout else ""
    if os.waitstatus_to_exitcode(status) != 0:
        raise RuntimeError(f"building {variant} failed ({status}): {text}")
    res = {**json.loads(text.strip().splitlines()[-1]), "proc_wall_s": wall,
           "cpu_s": ru.ru_utime + ru.ru_stime, "peak_rss_mb": ru.ru_maxrss / 1024,
           "load": os.getloadavg()[0]}
    out.write_text(json.dumps(res))
    return res


# -- measuring ------------------------------------------------------------------------------

def segments(tdir: Path) -> list[int]:
    meta = json.loads((tdir / "meta.json").read_text())
    return sorted((s["max_doc"] - (s.get("deletes") or {}).get("num_deleted_docs", 0)
                   for s in meta["segments"]), reverse=True)


def index_mb(tdir: Path) -> float:
    return sum(p.stat().st_size for p in tdir.iterdir() if p.is_file()) / 1e6


def prepare(store: Path, work: Path, variants: list[str], log=print) -> dict[str, dict]:
    """Build (or copy: as-built) every variant; their build figures."""
    built = resolve_paths(store / "home")
    info: dict[str, dict] = {}
    for v in variants:
        vdir = work / v
        if v == "as-built":
            if not (vdir / "index" / "tantivy").exists():
                shutil.rmtree(vdir, ignore_errors=True)
                shutil.copytree(built.data_dir / "index", vdir / "index")
            info[v] = {}
            continue
        cached = (vdir / "index" / "build.json").exists()
        info[v] = b = build(v, built.db, vdir / "index")
        log(f"{v}: {'built before: ' if cached else ''}{b['proc_wall_s']:.0f} s, CPU "
            f"{b['cpu_s']:.0f} s, peak RSS {b['peak_rss_mb']:.0f} MB, load {b['load']:.1f}")
    return info


def measure(args: argparse.Namespace, store: Path, work: Path, variants: list[str],
            info: dict[str, dict]) -> None:
    gen = h.TextGen(args.seed)
    queries = [(q, m) for _, q, m in gen.queries(random.Random(args.seed * 101), args.queries)
               if plan_query(q, m).match is not None]
    ixs = {v: bare_tantivy(work / v / "index" / "tantivy", create=False) for v in variants}
    times: dict[tuple[str, str], list[float]] = defaultdict(list)
    cpu: dict[tuple[str, str], list[float]] = defaultdict(list)
    daemons: dict[str, h.Memoryd] = {}
    built = resolve_paths(store / "home")
    src = work / "empty-src"
    src.mkdir(exist_ok=True)
    with h.short_dir() as sd:
        try:
            if not args.no_socket:
                for i, v in enumerate(variants):
                    home = work / v / "home"
                    shutil.rmtree(home, ignore_errors=True)
                    paths = resolve_paths(home)
                    paths.ensure()
                    shutil.copyfile(built.db, paths.db)
                    shutil.copytree(work / v / "index", paths.data_dir / "index")
                    daemons[v] = h.Memoryd(home, src, sd / f"m{i}.sock",
                                           log_path=work / v / "memoryd.log",
                                           env={"MEMORYD_AUTO_SUMMARY": "0"})
                for v, d in daemons.items():
                    d.wait_ready(300)
                    st = d.wait_caught_up(300)
                    print(f"daemon on {v}: index {st.get('index')}")
                settle(daemons)
            sides = [("bare", v) for v in variants] + [("socket", v) for v in daemons]
            orders = [sides[k:] + sides[:k] for k in range(len(sides))]
            orders += [o[::-1] for o in orders]
            t_start = time.perf_counter()
            for rep in range(args.repeat):
                for i, (q, mode) in enumerate(queries):
                    for side in sides:  # untimed first: the pages into the OS cache
                        one(side, q, mode, ixs, daemons)
                    if args.rg:  # caches cold again, as after any big read (search.py)
                        subprocess.run([RG, "-i", "-F", "-c", "-e", q.split()[0],
                                        str(store / "src")], capture_output=True)
                    for side in orders[(i + 3 * rep) % len(orders)]:
                        dt, dc = one(side, q, mode, ixs, daemons)
                        times[side].append(dt)
                        cpu[side].append(dc)
            elapsed = time.perf_counter() - t_start
        finally:
            for d in daemons.values():
                d.stop()
    print(f"\n{len(queries)} queries x {args.repeat} pass(es), each warmed once first; "
          f"{elapsed:.0f} s; load now {os.getloadavg()[0]:.1f}")
    base = h.summary(times[("bare", variants[0])])
    rows = []
    for v in variants:
        tdir = work / v / "index" / "tantivy"
        segs, b = segments(tdir), info.get(v, {})
        row = [v, str(len(segs)), ",".join(f"{n // 1000}k" for n in segs[:6])
               + (",…" if len(segs) > 6 else ""), f"{index_mb(tdir):.0f}",
               f"{b['proc_wall_s']:.0f}" if b else "", f"{b['cpu_s']:.0f}" if b else "",
               f"{b['peak_rss_mb']:.0f}" if b else ""]
        for kind in ("bare", "socket"):
            if not times[(kind, v)]:
                row += ["", "", ""]
                continue
            s = h.summary(times[(kind, v)])
            row += [f"{s['p50'] * 1000:.2f}", f"{s['p99'] * 1000:.2f}",
                    f"{statistics.fmean(cpu[(kind, v)]) * 1000:.2f}"]
        row.append(h.ratio(h.summary(times[("bare", v)])["p50"], base["p50"]))
        rows.append(row)
    print(h.table(rows, ["variant", "segs", "docs per segment", "index MB", "build s",
                         "build CPU s", "peak RSS MB", "bare p50", "bare p99", "bare CPU",
                         "socket p50", "socket p99", "socket CPU",
                         f"bare p50 / {variants[0]}"]))
    print("(ms; CPU: mean per search, bare: this thread, socket: the daemon, all threads)")


def settle(daemons: dict[str, h.Memoryd], timeout: float = 120.0) -> None:
    """Wait until no daemon uses CPU (< 20 ms a second): a daemon's CPU per search is its
    CPU over the search, all threads, so none may still be finishing its start."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        c0 = {v: h.proc_cpu_s(d.proc.pid) for v, d in daemons.items()}
        time.sleep(1.0)
        busy = [v for v, d in daemons.items() if h.proc_cpu_s(d.proc.pid) - c0[v] > 0.02]
        if not busy:
            return
    print(f"still busy after {timeout:.0f} s: {', '.join(busy)}")


def one(side: tuple[str, str], q: str, mode: str, ixs: dict, daemons: dict
        ) -> tuple[float, float]:
    kind, v = side
    if kind == "bare":
        c0, t0 = time.thread_time(), time.perf_counter()
        do_bare(ixs[v], q, mode)
        return time.perf_counter() - t0, time.thread_time() - c0
    d = daemons[v]
    c0, t0 = h.proc_cpu_s(d.proc.pid), time.perf_counter()
    d.client.search(query=q, mode=mode)
    return time.perf_counter() - t0, h.proc_cpu_s(d.proc.pid) - c0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--store", type=Path, default=STORE, help="a bigstore.py store directory")
    p.add_argument("--work", type=Path, default=h.OUT / f"segs-{os.getpid()}")
    p.add_argument("--variants", default="as-built,reindex,h128,h512")
    p.add_argument("--queries", type=int, default=150, help="distinct queries")
    p.add_argument("--repeat", type=int, default=1, help="timed passes over the queries")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--build-only", action="store_true")
    p.add_argument("--no-socket", action="store_true", help="bare tantivy only")
    p.add_argument("--rg", action="store_true",
                   help="an `rg` over the store's transcripts before each query's timed runs")
    p.add_argument("--clean", action="store_true", help="delete --work at the end")
    p.add_argument("--child", help=argparse.SUPPRESS)
    p.add_argument("--db", type=Path, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.child:
        print(json.dumps(build_child(args.db, args.work, args.child)))
        return 0
    print(f"segments benchmark: {h.machine()}")
    variants = args.variants.split(",")
    args.work.mkdir(parents=True, exist_ok=True)
    try:
        info = prepare(args.store, args.work, variants)
        if not args.build_only:
            measure(args, args.store, args.work, variants, info)
    finally:
        if args.clean:
            shutil.rmtree(args.work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
