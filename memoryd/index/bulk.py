"""A backlog's index writer, in a process of its own: `python -m memoryd.index.bulk`.

Started by the daemon's indexer (`memoryd.index.bulk_child.BulkChild`) once it has let
go of its own writer (tantivy's writer lock is a file lock: one writer at a time). It
reads the unit rows from the database itself, read-only (what is stored is already
redacted), builds their documents, adds them to its own writer and commits, one pass
per line of input (`upto done` -> `upto done rows`), exactly as the in-process pass does
(`memoryd.index.passes.add_batches`). At the end of its input it lets its merges finish
and exits. It logs to stderr (the daemon's log), never a unit's text.
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import logging
import os
import signal
import sys
from collections.abc import Sequence

import tantivy

from memoryd.index import WRITER_HEAP, connect_ro
from memoryd.index.passes import add_batches, read_batch
from memoryd.index.query import ids_query
from memoryd.index.schema import ANALYZER, build_analyzer, build_schema

log = logging.getLogger("memoryd.index.bulk")

PR_SET_PDEATHSIG = 1


def _die_with_parent(parent: int) -> None:
    """SIGKILL when the daemon's thread that started this process ends (Linux); and if
    it has ended already, now."""
    if sys.platform.startswith("linux"):
        with contextlib.suppress(OSError, AttributeError):
            ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, int(signal.SIGKILL))
    if os.getppid() != parent:
        os._exit(1)


def _lower_priority(nice: int) -> None:
    """`nice` below the priority this process started at (the daemon's): a rebuild's."""
    if nice:
        with contextlib.suppress(OSError):
            os.setpriority(os.PRIO_PROCESS, 0,
                           min(19, os.getpriority(os.PRIO_PROCESS, 0) + nice))


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m memoryd.index.bulk")
    p.add_argument("--index", required=True)
    p.add_argument("--db", required=True)
    p.add_argument("--batch", type=int, required=True)
    p.add_argument("--commit-every", type=float, required=True)
    p.add_argument("--nice", type=int, default=0)
    p.add_argument("--parent", type=int, required=True)
    args = p.parse_args(argv)
    _die_with_parent(args.parent)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a terminal's ^C: the daemon ends it
    _lower_priority(args.nice)  # before tantivy's threads start: they inherit it
    logging.basicConfig(stream=sys.stderr, level=logging.WARNING,
                        format="%(asctime)s %(levelname)s %(name)s[%(process)d]: %(message)s")
    idx = tantivy.Index.open(args.index)
    idx.register_tokenizer(ANALYZER, build_analyzer())
    schema = build_schema()
    w = idx.writer(heap_size=WRITER_HEAP, num_threads=1)
    conn = connect_ro(args.db)
    try:
        for line in sys.stdin:
            upto, done = (int(x) for x in line.split())
            got = read_batch(conn, upto, done, args.batch)
            rows = len(got[0]) + len(got[1])
            if rows:
                upto, done = add_batches(w, conn, (upto, done), got,
                                         lambda ids: ids_query(schema, ids),
                                         batch=args.batch, every_s=args.commit_every)
            sys.stdout.write(f"{upto} {done} {rows}\n")
            sys.stdout.flush()
        w.wait_merging_threads()
    finally:
        conn.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
