"""Where a backfill's CPU goes, stage by stage, in one thread of this process.

The daemon's pipeline run without threads or the event loop, so each stage's CPU time
(`time.thread_time`, tantivy's own worker threads by `time.process_time`) is its own:
on a shared, noisy machine wall time says little, CPU time says what a change did.

    reader   Ingestor._read_batch: lines, json, adapter, redaction, record ids
    store    Ingestor._commit: sessions, SessionWriter (executemany, counters, triggers)
    docs     index documents of the stored rows (memoryd.index.indexer.unit_docs)
    add      IndexWriter.add_document of those documents
    tantivy  tantivy's own threads: indexing (while the documents are added, as in the
             daemon) and the one commit at the end (process CPU less this thread's)

    .venv/bin/python bench/backfill_stages.py --quick     # the backfill.py --quick corpus
    .venv/bin/python bench/backfill_stages.py --repeat 1 --digest   # + what the index holds

`--digest` prints a SHA-256 of every unit's id, near-duplicate key (`dup_hash`) and index
texts (body, one-liner): run it from two trees (PYTHONPATH) to show that a change to the
documents' Python leaves the index's contents as they were (not timed).
"""

from __future__ import annotations

import argparse
import hashlib
import shutil
import sqlite3
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import harness as h  # noqa: E402

from memoryd.index import WRITER_HEAP  # noqa: E402
from memoryd.index.indexer import UNIT_ROWS, unit_docs  # noqa: E402
from memoryd.index.schema import ANALYZER, build_analyzer, build_schema  # noqa: E402
from memoryd.index.text import dup_hash, index_text  # noqa: E402
from memoryd.ingest import adapters  # noqa: E402
from memoryd.ingest.ingestor import Ingestor  # noqa: E402
from memoryd.redact import Redactor  # noqa: E402
from memoryd.store.db import connect  # noqa: E402
from memoryd.store.files import Cursor  # noqa: E402
from memoryd.store.migrations import migrate  # noqa: E402

STAGES = ("reader", "store", "docs", "add", "tantivy")


def index_digest(conn: sqlite3.Connection) -> str:
    """SHA-256 over every unit's (id, dup_hash, body index text, one-liner index text),
    in id order: what the documents' Python puts in the index."""
    digest = hashlib.sha256()
    for r in conn.execute(UNIT_ROWS + "ORDER BY u.id"):
        ol = index_text(r["one_liner"]) if r["one_liner"] else ""
        item = (r["unit_id"], dup_hash(r["content"]), index_text(r["content"]), ol)
        digest.update(repr(item).encode("utf-8", "surrogatepass") + b"\n")
    return digest.hexdigest()


def run_once(info: h.CorpusInfo, work: Path, digest: bool = False) -> dict[str, float]:
    import tantivy

    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    conn = connect(work / "m.db")
    migrate(conn)
    ing = Ingestor(None, Redactor(), max_line_bytes=16 << 20)  # type: ignore[arg-type]
    root = Path(info.path)
    cpu = dict.fromkeys(STAGES, 0.0)
    units = 0
    for path in h.corpus_files(root):
        with open(path, "rb") as f:
            first = f.readline()
        adapter = adapters.detect(path, root, first)
        cursor = Cursor(str(path), str(root), adapter.agent)
        while True:
            t0 = time.thread_time()
            batch = ing._read_batch(path, root, adapter, cursor)
            t1 = time.thread_time()
            conn.execute("BEGIN")
            added = ing._commit(conn, adapter, batch)
            conn.execute("COMMIT")
            t2 = time.thread_time()
            cpu["reader"] += t1 - t0
            cpu["store"] += t2 - t1
            units += sum(added.values())
            cursor = batch.cursor
            if batch.done:
                break
    conn.row_factory = sqlite3.Row
    (work / "tantivy").mkdir()
    idx = tantivy.Index(build_schema(), path=str(work / "tantivy"))
    idx.register_tokenizer(ANALYZER, build_analyzer())
    w = idx.writer(heap_size=WRITER_HEAP, num_threads=1)
    upto = 0
    p_start, t_start = time.process_time(), time.thread_time()
    while True:
        rows = conn.execute(UNIT_ROWS + "WHERE u.id > ? ORDER BY u.id LIMIT 2000",
                            (upto,)).fetchall()
        if not rows:
            break
        upto = rows[-1]["unit_id"]
        t0 = time.thread_time()
        docs = unit_docs(rows)
        t1 = time.thread_time()
        for d in docs:
            w.add_document(d)
        t2 = time.thread_time()
        cpu["docs"] += t1 - t0
        cpu["add"] += t2 - t1
    w.commit()
    w.wait_merging_threads()
    cpu["tantivy"] = (time.process_time() - p_start) - (time.thread_time() - t_start)
    if digest:
        print(f"index contents: sha256 {index_digest(conn)}")
    conn.close()
    cpu["units"] = units
    return cpu


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    h.corpus_options(p)
    p.add_argument("--repeat", type=int, default=3, help="runs (the median is shown)")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--digest", action="store_true",
                   help="print a SHA-256 of the units' ids, dup keys and index texts")
    args = h.corpus_size(p.parse_args(argv))
    print(f"backfill stages: {h.machine()}")
    info = h.corpus(args.files, args.lines, args.seed)
    runs = [run_once(info, h.OUT / "backfill-stages", args.digest and i == 0)
            for i in range(args.repeat)]
    shutil.rmtree(h.OUT / "backfill-stages", ignore_errors=True)
    units = runs[0]["units"]
    rows, total = [], 0.0
    for stage in STAGES:
        secs = statistics.median(r[stage] for r in runs)
        total += secs
        rows.append([stage, f"{secs:.2f}", f"{1e6 * secs / units:.0f}"])
    rows.append(["total", f"{total:.2f}", f"{1e6 * total / units:.0f}"])
    print(f"{units:,} units, CPU seconds (median of {args.repeat})")
    print(h.table(rows, ["stage", "cpu s", "µs/unit"]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
