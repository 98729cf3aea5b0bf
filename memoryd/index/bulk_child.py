"""The parent's handle on a backlog's index writer process (`memoryd.index.bulk`).

A backfill's or a rebuild's bulk passes run in a child process of their own, so their
Python (reading the unit rows back, building each unit's document) no longer takes turns
on the daemon's GIL with the file readers and the store's writer (bench/README, branches
`bcpu2`, `bcpu3`, `bproc`). The protocol is a line each way: the parent sends the
positions a pass starts from (`upto done`), the child indexes from there as the
in-process pass does (`memoryd.index.passes.add_batches`), commits, and answers with
the positions that commit holds and how many rows it read (`upto done rows`). It exits at
the end of its input, so it dies with the daemon's pipe (and, on Linux, by
PR_SET_PDEATHSIG when the thread that spawned it ends). A child that dies answers
nothing: `BulkChildGone`, and what it committed is in the index (the parent reads its
position back from there).
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from pathlib import Path

import memoryd


class BulkChildGone(Exception):
    """The index writer process ended (killed, crashed, out of memory)."""


class BulkChild:
    """`python -m memoryd.index.bulk` on one index directory and database."""

    def __init__(self, index_dir: Path, db_path: Path, *, nice: int, batch: int,
                 commit_every_s: float) -> None:
        self.nice = nice
        cmd = [sys.executable, "-m", "memoryd.index.bulk", "--index", str(index_dir),
               "--db", str(db_path), "--batch", str(batch), "--commit-every",
               str(commit_every_s), "--nice", str(nice), "--parent", str(os.getpid())]
        env = dict(os.environ)
        # the same package the daemon runs, wherever it was imported from
        root = str(Path(memoryd.__file__).resolve().parent.parent)
        env["PYTHONPATH"] = os.pathsep.join(filter(None, (root, env.get("PYTHONPATH"))))
        # stderr is the daemon's (its log); stdout is the protocol's
        self.proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     env=env, text=True, bufsize=1, close_fds=True)

    @property
    def pid(self) -> int:
        return self.proc.pid

    def run(self, upto: int, done: int) -> tuple[int, int, int]:
        """One pass from these positions: (upto, done) once committed, and the rows it
        read (0: nothing new, no commit)."""
        assert self.proc.stdin is not None and self.proc.stdout is not None
        try:
            self.proc.stdin.write(f"{upto} {done}\n")
            self.proc.stdin.flush()
            line = self.proc.stdout.readline()
        except (OSError, ValueError) as e:  # a broken pipe, or closed by `kill`
            raise BulkChildGone(self._gone()) from e
        try:
            a, b, n = (int(x) for x in line.split())
        except ValueError:
            raise BulkChildGone(self._gone()) from None
        return a, b, n

    def _gone(self) -> str:
        self._close_pipes()
        try:
            code = self.proc.wait(5.0)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            code = self.proc.wait()
        return f"pid {self.proc.pid}, exit code {code}"

    def end(self, timeout: float = 30.0) -> int | None:
        """End of input: the child lets its merges finish and exits (killed after
        `timeout`). Its exit code."""
        self._close_pipes()
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            return self.proc.wait()

    def _close_pipes(self) -> None:
        for f in (self.proc.stdin, self.proc.stdout):
            if f is not None:
                with contextlib.suppress(OSError):
                    f.close()
