"""Search latency on a large store: memoryd (in-process and over its Unix socket) vs a bare
tantivy index over the same texts, and vs `rg -i -F` over the same transcripts.

The store is built once with memoryd's own code (generic adapter -> session_pk +
store_record in 10k-unit transactions through Store.write_sync; no redaction pass; the
store's own index writer follows) and cached under bench/out/search-g<gen>-<units>-s<seed>/,
keyed by size and seed, so reruns skip the build; when the index's SCHEMA_VERSION
changed, only memoryd's index is rebuilt (by memoryd's own writer). Each run works on a
fresh copy of the cached database and index (the daemon may write to them). The raw baselines are built in the same pass: a bare tantivy index (memoryd's
schema and analyzer, same index text: CJK runs as bigrams) holding unit id and body only,
queried with the same query memoryd builds, top 15, no reranking; and the transcripts as
JSONL files for rg.

Measured per query in a balanced rotating order, each query first run once untimed by raw
and inproc so every side finds its pages in the OS cache (--cold skips that):
  raw      bare tantivy: the query memoryd builds, top 15 (this process)
  inproc   memoryd.search.search(store, SearchRequest(...)) in this process
  socket   POST /v1/search to a memoryd subprocess serving the same database (MemorydClient;
           automatic summaries off unless --with-summaries)
  rg       `rg -i -F -c -e WORD ...` over the transcripts (a subprocess; --no-rg skips it)

    .venv/bin/python bench/search.py               # 1,000,000 units (first run builds)
    .venv/bin/python bench/search.py --quick       # 100,000 units
    .venv/bin/python bench/search.py --units 300000 --queries 400 --repeat 3
"""

from __future__ import annotations

import argparse
import asyncio
import json
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

from memoryd.api import SearchRequest  # noqa: E402
from memoryd.index.query import text_query  # noqa: E402
from memoryd.index.schema import ANALYZER, build_analyzer, build_schema, document  # noqa: E402
from memoryd.index.text import index_text  # noqa: E402
from memoryd.ingest import adapters  # noqa: E402
from memoryd.ingest.adapters.base import content_id  # noqa: E402
from memoryd.paths import resolve_paths  # noqa: E402
from memoryd.retrieval import plan_query  # noqa: E402
from memoryd.search import search  # noqa: E402
from memoryd.store import Store  # noqa: E402
from memoryd.store.sessions import session_pk  # noqa: E402
from memoryd.store.units import store_record  # noqa: E402

PER_SESSION = 500
CHUNK = 10_000
IMPLS = ("raw", "inproc", "socket", "rg")
RG = shutil.which("rg")


def bare_tantivy(path: Path, create: bool):
    import tantivy

    if create:
        shutil.rmtree(path, ignore_errors=True)
        path.mkdir(parents=True)
        idx = tantivy.Index(build_schema(), path=str(path))
    else:
        idx = tantivy.Index.open(str(path))
    idx.register_tokenizer(ANALYZER, build_analyzer())
    return idx


_BARE: list = []  # schema, analyzer


def do_bare(idx, q: str, mode: str) -> int:
    """The bare-tantivy baseline: the query memoryd builds, top 15, unit ids read."""
    s = idx.searcher()
    if not _BARE:
        _BARE.extend((build_schema(), build_analyzer()))
    query = text_query(_BARE[0], _BARE[1], s, plan_query(q, mode).terms, mode)
    if query is None:
        return 0
    hits = s.search(query, 15, count=False).hits
    return len(s.fast_field_values("unit_id", [a for _, a in hits]))


def memoryd_match(q: str, mode: str) -> str | None:
    return plan_query(q, mode).match


def group(cls: str) -> str:
    """Query class for the breakdown: en-or-<k>w, en-and, zh."""
    return "en-and" if "-and-" in cls else cls


def index_fingerprint() -> str:
    """Changes when what memoryd's index holds changes: its SCHEMA_VERSION (bumped with
    every change to the schema, the analyzer or the index text; memoryd itself rebuilds
    an index of another version)."""
    from memoryd.index.schema import SCHEMA_VERSION

    return f"schema-{SCHEMA_VERSION}"


def build(units: int, seed: int, dir: Path) -> dict:
    """memoryd store + bare tantivy twin + JSONL transcripts with `units` units; cached by
    its parameters."""
    meta = dir / "meta.json"
    fp = index_fingerprint()
    if meta.exists():
        info = json.loads(meta.read_text())
        if info.get("index_fingerprint") == fp:
            return info
        return reindex(dir, info, fp)
    shutil.rmtree(dir, ignore_errors=True)
    dir.mkdir(parents=True)
    paths = resolve_paths(dir / "home")
    paths.ensure()
    store = Store.open_sync(paths.db)
    raw_ix = bare_tantivy(dir / "raw-tantivy", create=True)
    raw = raw_ix.writer(heap_size=200_000_000, num_threads=1)
    src = dir / "src"
    out_file = None
    gen = h.TextGen(seed)
    rng = random.Random(seed * 31)
    adapter = adapters.for_agent("generic")
    root = Path("/bench")
    print(f"building a {units:,}-unit store in {dir} (cached for later runs) ...", flush=True)
    t0 = time.perf_counter()
    timing = {"generate": 0.0, "memoryd": 0.0, "raw": 0.0}
    done = 0
    session = 0
    lines = None
    state: dict = {}
    while done < units:
        # one chunk of records from generated transcript lines
        tg = time.perf_counter()
        recs = []
        while len(recs) < min(CHUNK, units - done):
            if lines is None:
                rel = Path(f"proj{session % 37:02d}") / f"s{session:05d}.jsonl"
                path = root / rel
                state = adapter.start(path, root)
                if out_file is not None:
                    out_file.close()
                (src / rel).parent.mkdir(parents=True, exist_ok=True)
                out_file = open(src / rel, "w")  # noqa: SIM115
                lines = gen.lines(rng, PER_SESSION, f"s{session}")
                session += 1
            obj = next(lines, None)
            if obj is None:
                lines = None
                continue
            out_file.write(json.dumps(obj, ensure_ascii=False) + "\n")
            for rec in adapter.parse_line(obj, state):
                if rec.content.strip():
                    recs.append((dict(state), rec))
        recs = recs[: units - done]
        timing["generate"] += time.perf_counter() - tg

        def write(conn: sqlite3.Connection, recs=recs) -> list[tuple[int, str]]:
            pks: dict[str, int] = {}
            out = []
            for st, rec in recs:
                sid = rec.session_id or st["session_id"]
                if sid not in pks:
                    pks[sid] = session_pk(conn, adapter.agent, sid, st.get("project"))
                rid = rec.record_id or content_id(rec.role, rec.kind, rec.ts, rec.content)
                stored = store_record(conn, pks[sid], rec, rid, None, None)
                if stored is not None and stored.new:
                    out.append((stored.unit_id, rec.content))
            return out

        tm = time.perf_counter()
        stored = store.write_sync(write)
        timing["memoryd"] += time.perf_counter() - tm
        tr = time.perf_counter()
        for uid, text in stored:
            raw.add_document(document({"unit_id": uid, "session_pk": 0, "seq": 0, "ts": None},
                                      index_text(text), ""))
        raw.commit()
        timing["raw"] += time.perf_counter() - tr
        done += len(stored)
        if done % 100_000 < CHUNK:
            el = time.perf_counter() - t0
            print(f"  {done:,} units, {el:.0f} s (generate {timing['generate']:.0f} s, "
                  f"memoryd write {timing['memoryd']:.0f} s, raw insert {timing['raw']:.0f} s)",
                  flush=True)
    if out_file is not None:
        out_file.close()
    tw = time.perf_counter()
    while not store.read_sync(store.index.is_caught_up):  # memoryd's own index writer
        time.sleep(0.5)
    print(f"  memoryd's index caught up {time.perf_counter() - tw:.0f} s after the last write",
          flush=True)
    store.close_sync()
    raw.wait_merging_threads()
    c = sqlite3.connect(paths.db)
    c.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    n = c.execute("SELECT count(*) FROM units").fetchone()[0]
    c.close()
    info = {"units": n, "sessions": session, "index_fingerprint": fp,
            "build_s": round(time.perf_counter() - t0, 1),
            **{f"{k}_s": round(v, 1) for k, v in timing.items()},
            "memoryd_db_mb": round(h.dir_mb(paths.data_dir)),
            "memoryd_index_mb": round(h.dir_mb(paths.data_dir / "index")),
            "raw_db_mb": round(h.dir_mb(dir / "raw-tantivy")),
            "transcripts_mb": round(h.dir_mb(src))}
    meta.write_text(json.dumps(info))
    print(f"  built in {info['build_s']} s: {info}", flush=True)
    return info


def reindex(dir: Path, info: dict, fp: str) -> dict:
    """memoryd/index/ changed since the cached build: keep the database, the transcripts
    and the bare twin, and let memoryd's own writer rebuild its index from the database."""
    print("memoryd/index/ changed since the cached build: rebuilding memoryd's index only",
          flush=True)
    paths = resolve_paths(dir / "home")
    shutil.rmtree(paths.data_dir / "index", ignore_errors=True)
    t0 = time.perf_counter()
    store = Store.open_sync(paths.db)
    while not store.read_sync(store.index.is_caught_up):
        time.sleep(0.5)
    store.close_sync()
    info.update(index_fingerprint=fp, reindex_s=round(time.perf_counter() - t0, 1),
                memoryd_db_mb=round(h.dir_mb(paths.data_dir)),
                memoryd_index_mb=round(h.dir_mb(paths.data_dir / "index")))
    (dir / "meta.json").write_text(json.dumps(info))
    print(f"  reindexed in {info['reindex_s']} s: {info}", flush=True)
    return info


async def run(args: argparse.Namespace, dir: Path, info: dict) -> None:
    gen = h.TextGen(args.seed)
    queries = gen.queries(random.Random(args.seed * 101), args.queries)
    # a fresh copy of the built database for this run: memoryd may migrate or write to it
    run_home = dir / "run-home"
    shutil.rmtree(run_home, ignore_errors=True)
    paths = resolve_paths(run_home)
    paths.ensure()
    t0 = time.perf_counter()
    built = resolve_paths(dir / "home")
    shutil.copyfile(built.db, paths.db)
    shutil.copytree(built.data_dir / "index", paths.data_dir / "index")
    print(f"copied the built database for this run in {time.perf_counter() - t0:.1f} s")
    store = await Store.open(paths.db)
    raw_ix = bare_tantivy(dir / "raw-tantivy", create=False)
    src = dir / "empty-src"
    src.mkdir(exist_ok=True)
    times: dict[str, list[float]] = defaultdict(list)
    by_class: dict[tuple[str, str], list[float]] = defaultdict(list)
    totals: dict[str, list[int]] = defaultdict(list)
    with h.short_dir() as sd:
        # the copied store's sessions are all idle and unsummarized: with automatic
        # summaries on, the daemon works through that backlog while it is measured
        env = {} if args.with_summaries else {"MEMORYD_AUTO_SUMMARY": "0"}
        d = h.Memoryd(run_home, src, sd / "m.sock", log_path=dir / "memoryd.log", env=env)
        try:
            d.wait_ready(300)  # a busy machine: imports alone can take tens of seconds
            d.wait_caught_up(300)
            client = d.client

            def do_raw(q: str, mode: str, match: str) -> int:
                return do_bare(raw_ix, q, mode)

            def do_rg(q: str, mode: str, match: str) -> int:
                pats = [x for t in plan_query(q, mode).terms for x in ("-e", t)]
                r = subprocess.run([RG, "-i", "-F", "-c", *pats, str(dir / "src")],
                                   capture_output=True, text=True)
                return len(r.stdout.splitlines())

            async def do_inproc(q: str, mode: str, match: str) -> int:
                return (await search(store, SearchRequest(query=q, mode=mode))).total

            def do_socket(q: str, mode: str, match: str) -> int:
                return client.search(query=q, mode=mode)["total"]

            impls = [("raw", do_raw), ("inproc", do_inproc), ("socket", do_socket)]
            if RG and not args.no_rg:
                impls.append(("rg", do_rg))
            # every impl precedes every other equally often: the rotations and their
            # reversals
            idx = list(range(len(impls)))
            orders = [idx[k:] + idx[:k] for k in idx]
            orders += [o[::-1] for o in orders]
            warm = [x for x in impls if x[0] in ("raw", "inproc")]

            async def call(fn, q: str, mode: str, match: str) -> tuple[float, int]:
                t0 = time.perf_counter()
                r = fn(q, mode, match)
                if asyncio.iscoroutine(r):
                    r = await r
                return time.perf_counter() - t0, r

            t_start = time.perf_counter()
            for rep in range(args.repeat):
                for i, (cls, q, mode) in enumerate(queries):
                    match = memoryd_match(q, mode)
                    if match is None:
                        continue
                    if not args.cold:  # the query's pages into the OS and SQLite caches
                        for _, fn in warm:
                            await call(fn, q, mode, match)
                    for j in orders[(i + 3 * rep) % len(orders)]:
                        name, fn = impls[j]
                        dt, r = await call(fn, q, mode, match)
                        times[name].append(dt)
                        by_class[(name, group(cls))].append(dt)
                        if name == "inproc":
                            totals[group(cls)].append(r)
            elapsed = time.perf_counter() - t_start
        finally:
            d.stop()
            await store.close()
            if not args.keep:
                shutil.rmtree(run_home, ignore_errors=True)

    names = {"raw": "raw: bare tantivy, same query, top 15",
             "inproc": "memoryd in-process: search.search()",
             "socket": "memoryd over the Unix socket",
             "rg": "rg -i -F -c over the transcripts"}
    impl_names = [n for n in IMPLS if times[n]]
    print()
    print(f"{len(queries)} queries x {args.repeat} timed pass(es), "
          f"{'cold' if args.cold else 'each warmed once first'}, on {info['units']:,} units "
          f"(memoryd data {info['memoryd_db_mb']} MB of which index "
          f"{info.get('memoryd_index_mb')} MB, bare tantivy {info['raw_db_mb']} MB, "
          f"transcripts {info.get('transcripts_mb')} MB); "
          f"{elapsed:.0f} s")
    rows = []
    raw_s = h.summary(times["raw"])
    for name in impl_names:
        s = h.summary(times[name])
        rows.append([names[name], f"{s['p50'] * 1000:.2f}", f"{s['p90'] * 1000:.2f}",
                     f"{s['p99'] * 1000:.2f}", f"{s['max'] * 1000:.1f}",
                     "" if name == "raw" else h.ratio(s["p50"], raw_s["p50"]),
                     "" if name == "raw" else h.ratio(s["p99"], raw_s["p99"])])
    print(h.table(rows, ["search latency (ms)", "p50", "p90", "p99", "max", "p50 ratio",
                         "p99 ratio"]))
    print("(ratios against the first row, the baseline as specified)")
    if times["rg"]:
        rg, sock = h.summary(times["rg"]), h.summary(times["socket"])
        print(f"rg / memoryd over the socket: p50 {h.ratio(rg['p50'], sock['p50'])}")
    print()
    classes = sorted({c for _, c in by_class})
    rows = []
    for c in classes:
        n = len(by_class[("raw", c)])
        cells = [f"{statistics.median(by_class[(m, c)]) * 1000:.2f}"
                 for m in impl_names]
        rows.append([c, str(n), f"{statistics.median(totals[c]):,.0f}",
                     *cells, h.ratio(statistics.median(by_class[("socket", c)]),
                                     statistics.median(by_class[("raw", c)]))])
    print(h.table(rows, ["p50 by query class (ms)", "n", "median hits", *impl_names,
                         "socket/raw"]))


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--units", type=int, default=1_000_000)
    p.add_argument("--quick", action="store_true", help="100,000 units, 100 queries")
    p.add_argument("--queries", type=int, default=150, help="distinct queries")
    p.add_argument("--repeat", type=int, default=1, help="timed passes over the queries")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--cold", action="store_true",
                   help="no untimed run of each query first (times include cache misses)")
    p.add_argument("--build-only", action="store_true")
    p.add_argument("--keep", action="store_true", help="keep this run's database copy")
    p.add_argument("--no-rg", action="store_true", help="leave rg out")
    p.add_argument("--with-summaries", action="store_true",
                   help="leave the daemon's automatic summaries on (it then summarizes the "
                        "store's idle sessions while it answers)")
    args = p.parse_args(argv)
    if args.quick:
        args.units, args.queries = 100_000, 100
    print(f"search benchmark: {h.machine()}")
    dir = h.OUT / f"search-g{h.GEN_VERSION}-{args.units}-s{args.seed}"
    info = build(args.units, args.seed, dir)
    if args.build_only:
        return 0
    asyncio.run(run(args, dir, info))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
