"""Ingest lag: a line appended to a transcript -> searchable, p50/p99 over many appends.

memoryd runs as a subprocess watching a directory of generic-JSONL files (seeded with some
history). Each append writes one line carrying a unique token to one of the files, then
polls POST /v1/search over the Unix socket (memoryd.client.MemorydClient) every --poll-ms
until the token is found; lag = found - just before the write.

The raw baseline runs in the same run, alternating append by append with memoryd so both
see the same machine noise: a minimal in-process watcher (watchfiles.awatch with
debounce=50, step=50 like memoryd's defaults; read the new bytes, json.loads, insert into a
bare `fts5(body)` table, commit) and the same poll loop doing a bare
`SELECT rowid FROM t WHERE t MATCH ?` at the same interval. The floor of the loop itself
(the append alone) is printed too.

    .venv/bin/python bench/ingest_lag.py            # 200 appends (~1 min)
    .venv/bin/python bench/ingest_lag.py --quick    # 60 appends (~20 s)
    .venv/bin/python bench/ingest_lag.py --appends 1000 --poll-ms 2 --files 16
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import shutil
import sqlite3
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import harness as h  # noqa: E402
from watchfiles import awatch  # noqa: E402


class BareWatcher:
    """The floor of "watch -> parse -> index": awatch + json.loads + bare FTS5 insert, in a
    thread with its own event loop, writing to its own SQLite file."""

    def __init__(self, root: Path, db: Path, debounce_ms: int = 50) -> None:
        self.root, self.db, self.debounce_ms = root, db, debounce_ms
        self.offsets = {str(p): p.stat().st_size for p in root.glob("*.jsonl")}
        self.batches = 0
        self.errors: list[str] = []
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self._started = threading.Event()
        self._thread = threading.Thread(target=lambda: asyncio.run(self._main()), daemon=True,
                                        name="bare-watcher")

    def start(self) -> None:
        self._thread.start()
        self._started.wait(10)

    def stop(self) -> None:
        if self._loop and self._stop:
            self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(10)

    async def _main(self) -> None:
        self._loop, self._stop = asyncio.get_running_loop(), asyncio.Event()
        conn = sqlite3.connect(self.db, isolation_level=None)
        self._started.set()
        step = min(50, self.debounce_ms)
        async for changes in awatch(self.root, debounce=self.debounce_ms, step=step,
                                    stop_event=self._stop):
            try:
                rows = []
                for _, path in changes:
                    off = self.offsets.get(path, 0)
                    with open(path, "rb") as f:
                        f.seek(off)
                        data = f.read()
                    cut = data.rfind(b"\n") + 1
                    self.offsets[path] = off + cut
                    for line in data[:cut].splitlines():
                        if line.strip():
                            rows.append((json.loads(line)["content"],))
                if rows:
                    conn.execute("BEGIN")
                    conn.executemany("INSERT INTO t (body) VALUES (?)", rows)
                    conn.execute("COMMIT")
                self.batches += 1
            except Exception as e:  # keep the floor running; report at the end
                self.errors.append(repr(e))
        conn.close()


def seed(dir: Path, files: int, lines: int, gen: h.TextGen, rng: random.Random) -> list[Path]:
    dir.mkdir(parents=True)
    paths = []
    for i in range(files):
        p = dir / f"live-{i:02d}.jsonl"
        with open(p, "w", encoding="utf-8") as f:
            for obj in gen.lines(rng, lines, f"seed{i}"):
                f.write(json.dumps(obj, ensure_ascii=False) + "\n")
        paths.append(p)
    return paths


def append(path: Path, line: str) -> None:
    with open(path, "a", encoding="utf-8") as f:
        f.write(line)


def measure(path: Path, line: str, found: Callable[[], bool], poll: float,
            timeout: float, calls: list[float], walls: list[float] | None = None
            ) -> float | None:
    """Append `line` to `path`, then poll `found` every `poll` s; seconds until found.
    `walls` gets the wall-clock time of the append (to match the daemon's trace)."""
    if walls is not None:
        walls.append(time.time())
    t0 = time.perf_counter()
    append(path, line)
    while True:
        c0 = time.perf_counter()
        ok = found()
        now = time.perf_counter()
        calls.append(now - c0)
        if ok:
            return now - t0
        if now - t0 > timeout:
            return None
        time.sleep(poll)


STAGES = ("wake", "watch", "ingest", "cursor", "prepared", "read", "stored", "index_read",
          "index_tail", "index_added", "index_commit", "index_reload")
"""`wake`: the watch's inotify doorbell rang. `index_tail`: the units are in the live
tail, searchable (no commit needed); the commit stages come from the tail's policy,
seconds later, beside the append's way, and are usually past the poll's find."""
CHAIN = ("watch", "ingest", "cursor", "prepared", "read", "stored", "index_read",
         "index_tail")
"""One append's way, in order: each counted only after the one before it (not a
previous append's late stage)."""


def trace_table(log: Path, walls: list[float], lags: list[float | None],
                slowest: int = 6) -> str:
    """Per stage, ms from the append to the stage's first trace line after it (p50, p90):
    where memoryd's share of each append went; then the `slowest` appends' own stages."""
    events: list[tuple[float, str]] = []
    for ln in log.read_text(errors="replace").splitlines():
        parts = ln.split(" lag ", 1)
        if len(parts) == 2:
            name, t, *_ = parts[1].split(" ")
            events.append((float(t), name))
    events.sort()
    at: dict[str, list[float]] = {s: [] for s in STAGES}
    per: list[tuple[float, dict[str, float]]] = []  # each append's own stages
    for t0, lag in zip(walls, lags, strict=True):
        if lag is None:
            continue
        seen: dict[str, float] = {}
        after = t0  # the chain's stages each after the one before (not a previous
        for t, name in events:  # append's later stage)
            if t < t0 or name in seen or name not in at:
                continue
            if t > t0 + lag:
                break
            if name in CHAIN:
                if t < after or CHAIN.index(name) and CHAIN[CHAIN.index(name) - 1] not in seen:
                    continue
                after = t
            seen[name] = t - t0
            at[name].append(t - t0)
        per.append((lag, seen))
    rows = [[s, str(len(v)), *(f"{h.percentile(v, q) * 1000:.1f}" if v else "-"
                               for q in (50, 90))] for s, v in at.items()]
    rows.append(["found by the search poll", str(len([x for x in lags if x is not None])),
                 *(f"{h.percentile([x for x in lags if x is not None], q) * 1000:.1f}"
                   for q in (50, 90))])
    table = h.table(rows, ["memoryd stage (ms after the append)", "n", "p50", "p90"])
    # the p99 is a few slow appends: where did each of them lose its time
    slow = sorted(per, key=lambda x: -x[0])[:slowest]
    lines = [f"  {lag * 1000:6.1f} ms: " + ", ".join(
        f"{name} {t * 1000:.0f}" for name, t in sorted(st.items(), key=lambda x: x[1]))
        for lag, st in slow]
    return table + f"\n\nthe {len(slow)} slowest appends (ms after the append):\n" + \
        "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--appends", type=int, default=200)
    p.add_argument("--files", type=int, default=8, help="files the appends rotate over")
    p.add_argument("--seed-lines", type=int, default=250, help="history lines per file")
    p.add_argument("--poll-ms", type=float, default=5.0, help="search polling interval")
    p.add_argument("--gap-ms", type=float, nargs=2, default=(20.0, 50.0),
                   help="random pause between appends (min max)")
    p.add_argument("--timeout", type=float, default=10.0, help="give up on one append after")
    p.add_argument("--warmup", type=int, default=5, help="unmeasured appends per side")
    p.add_argument("--quick", action="store_true", help="60 appends (~20 s)")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--trace", action="store_true",
                   help="run memoryd at DEBUG and print where an append's time went "
                        "(memoryd.runtime.lag_trace stages)")
    args = p.parse_args(argv)
    if args.quick:
        args.appends = 60

    print(f"ingest-lag benchmark: {h.machine()}")
    work = h.OUT / "lag-run"
    shutil.rmtree(work, ignore_errors=True)
    gen = h.TextGen(args.seed)
    rng = random.Random(args.seed)
    md_files = seed(work / "md-src", args.files, args.seed_lines, gen, random.Random(args.seed))
    raw_files = seed(work / "raw-src", args.files, args.seed_lines, gen, random.Random(args.seed))
    run_id = f"{int(time.time()) % 100000:05d}"
    total = args.appends + args.warmup
    payload = []
    for i in range(total):
        body = gen.english(rng, rng.randint(100, 600))
        cut = rng.randrange(len(body))
        payload.append((f"lag{run_id}n{i:05d}", body[:cut], body[cut:]))

    def line(i: int, side: str) -> str:
        tok, a, b = payload[i]
        obj = {"role": "user" if i % 2 else "assistant", "content": f"{a} {tok}{side} {b}",
               "id": f"lag:{tok}{side}", "timestamp": time.strftime("%Y-%m-%dT%H:%M:%SZ",
                                                                     time.gmtime())}
        return json.dumps(obj, ensure_ascii=False) + "\n"

    # raw side: bare FTS5 seeded with the same history
    db = work / "raw.db"
    conn = h.bare_fts(db)
    conn.execute("BEGIN")
    for f in raw_files:
        for ln in f.read_text(encoding="utf-8").splitlines():
            body = json.loads(ln).get("content")
            if body:
                conn.execute("INSERT INTO t (body) VALUES (?)", (body,))
    conn.execute("COMMIT")
    bare = BareWatcher(work / "raw-src", db)
    bare.start()

    poll, timeout = args.poll_ms / 1000, args.timeout
    md_lag: list[float | None] = []
    raw_lag: list[float | None] = []
    md_calls: list[float] = []
    raw_calls: list[float] = []
    appends_only: list[float] = []
    md_walls: list[float] = []
    with h.short_dir() as sd:
        d = h.Memoryd(work / "home", work / "md-src", sd / "m.sock",
                      log_path=work / "memoryd.log",
                      log_level="DEBUG" if args.trace else "WARNING")
        try:
            d.wait_ready(60)
            st0 = d.wait_caught_up(120)
            print(f"memoryd caught up: {st0['units']:,} units in {st0['files']} files; "
                  f"{args.appends} appends over {args.files} files, poll every "
                  f"{args.poll_ms:g} ms, gap {args.gap_ms[0]:g}-{args.gap_ms[1]:g} ms")
            client = d.client

            def md_found(tok: str) -> Callable[[], bool]:
                return lambda: client.search(query=tok, max_results=1)["total"] > 0

            def raw_found(tok: str) -> Callable[[], bool]:
                phrase = h.fts_phrase(tok)
                return lambda: conn.execute("SELECT rowid FROM t WHERE t MATCH ? LIMIT 1",
                                            (phrase,)).fetchone() is not None

            t_start = time.perf_counter()
            for i in range(total):
                k = i % args.files
                tok = payload[i][0]
                # alternate which side goes first so neither always follows the other
                sides = [("md", md_files[k], md_found(tok + "m"), md_lag, md_calls),
                         ("raw", raw_files[k], raw_found(tok + "r"), raw_lag, raw_calls)]
                if i % 2:
                    sides.reverse()
                for side, path, found, lags, calls in sides:
                    walls = md_walls if side == "md" and i >= args.warmup else None
                    lag = measure(path, line(i, side[0]), found, poll, timeout, calls, walls)
                    if i >= args.warmup:
                        lags.append(lag)
                    time.sleep(rng.uniform(*args.gap_ms) / 1000)
                # the loop's own floor: an append alone (to a scratch file)
                t0 = time.perf_counter()
                append(work / "scratch.jsonl", line(i, "x"))
                appends_only.append(time.perf_counter() - t0)
            elapsed = time.perf_counter() - t_start
            st = d.status() or {}
            rss = d.peak_rss_mb()
        finally:
            d.stop()
            bare.stop()
    conn.close()

    def stats(xs: list[float | None]) -> tuple[dict[str, float], int]:
        ok = [x for x in xs if x is not None]
        return h.summary(ok), len(xs) - len(ok)

    (md, md_miss), (raw, raw_miss) = stats(md_lag), stats(raw_lag)
    floor = h.summary(appends_only)
    rows = []
    for name, s, miss in (("memoryd (subprocess, search over socket)", md, md_miss),
                          ("raw: awatch + json + bare fts5 + MATCH", raw, raw_miss),
                          ("floor: the append alone", floor, 0)):
        rows.append([name, *(f"{s[k] * 1000:.1f}" for k in ("p50", "p90", "p99", "max")),
                     str(miss)])
    print()
    print(h.table(rows, ["append -> searchable (ms)", "p50", "p90", "p99", "max", "missed"]))
    print()
    print(f"ratio memoryd/raw: p50 {h.ratio(md['p50'], raw['p50'])}, "
          f"p99 {h.ratio(md['p99'], raw['p99'])}   ({md['n']} appends each, "
          f"{elapsed:.0f} s)")
    print(f"one poll call, p50/p99: memoryd search {h.percentile(md_calls, 50) * 1000:.2f}/"
          f"{h.percentile(md_calls, 99) * 1000:.2f} ms, bare MATCH "
          f"{h.percentile(raw_calls, 50) * 1000:.3f}/{h.percentile(raw_calls, 99) * 1000:.3f} ms")
    print(f"memoryd /v1/status ingest_lag_ms (last live file): {st.get('ingest_lag_ms')}; "
          f"units {st.get('units')}; peak RSS {rss and round(rss)} MB")
    if args.trace:
        print()
        print(trace_table(work / "memoryd.log", md_walls, md_lag))
    if bare.errors:
        print(f"warning: bare watcher errors: {bare.errors[:3]}")
    if md_miss or raw_miss:
        print(f"warning: {md_miss} memoryd and {raw_miss} raw appends not found within "
              f"{timeout:g} s (excluded from the percentiles)")
    shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
