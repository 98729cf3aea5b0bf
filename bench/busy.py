"""A fixed background load for a benchmark run: N processes that each keep one core busy.

A figure "under load" otherwise depends on whatever else the machine runs. `BusyLoad(n)`
starts n busy-looping Python processes at nice 0 before the timed part and stops them
after it, so before/after pairs can be compared at the same load. Each runs in its own
session, hence (with the kernel's autogroup scheduling, on by default on Linux desktops
and on this machine) in its own scheduling group, as another user's or engineer's job
would: `--load 1` on two cores leaves the benchmark one core while the loader runs.
`report()` says what they got: the CPU share each had of the wall time (≈ 1.0 when it ran
all along) and the 1-minute load average.

    with BusyLoad(2) as load:
        ...timed part...
    print(load.report())
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

SPIN = "while True:\n    pass\n"


def _cpu_s(pid: int) -> float:
    """CPU seconds a process has run so far (the scheduler's own account)."""
    try:
        return int(Path(f"/proc/{pid}/schedstat").read_text().split()[0]) / 1e9
    except (OSError, ValueError, IndexError):
        return float("nan")


class BusyLoad:
    def __init__(self, n: int) -> None:
        if n < 0:
            raise ValueError(f"--load must be >= 0, not {n}")
        self.n = n
        self.procs: list[subprocess.Popen] = []
        self.shares: list[float] = []
        self.load_start = self.load_end = 0.0
        self._t0 = 0.0

    def __enter__(self) -> BusyLoad:
        self.load_start = os.getloadavg()[0]
        for _ in range(self.n):
            self.procs.append(subprocess.Popen(
                [sys.executable, "-c", SPIN], start_new_session=True,
                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL))
        self._t0 = time.perf_counter()
        return self

    def __exit__(self, *exc: object) -> None:
        wall = time.perf_counter() - self._t0
        self.load_end = os.getloadavg()[0]
        for p in self.procs:
            self.shares.append(_cpu_s(p.pid) / wall if wall > 0 else float("nan"))
            p.send_signal(signal.SIGKILL)
        for p in self.procs:
            p.wait()
        self.procs.clear()

    def report(self) -> str:
        shares = ", ".join(f"{s:.2f}" for s in self.shares) or "-"
        return (f"background load: {self.n} busy process(es), each in its own session, "
                f"CPU share of the run {shares}; load average {self.load_start:.2f} at the "
                f"start, {self.load_end:.2f} at the end")
