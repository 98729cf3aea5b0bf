"""A search's second pair of hands: one persistent thread that runs an independent part
of a search while the asking thread runs another.

tantivy releases the GIL while it searches, so two searches of one request that do not
depend on each other overlap on a second core (`IndexReader.ranked`): a split OR query's
one-liner search beside its body clauses' top n, an AND query's two disjoint parts. The
goal is a search's wall time, not its CPU: the same work runs, on two threads, and only
pays while the machine has a core to spare (bench/README, branch `srch`). Smaller parts
do not pay for the hand-over: which terms each hit matched (`matched_fields`, ~0.09 ms)
run beside the hits' rows cost a context +0.15 ms p50 and +0.15-0.25 ms CPU at load 4.

One thread for the whole index, not one per request: a part is handed over only while
the helper is idle and the request asking is the only search or context running
(`asking`, around the whole request: with two at once, each already has a core's worth
of work, and a third thread only adds switches and a worse tail). Otherwise the asking
thread runs the part itself when it asks for the result, as it would without a helper,
so concurrent requests never queue behind one another here. The thread starts on the
first hand-over and ends after `IDLE_S` without one: an idle daemon holds no thread for
it.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Generic, TypeVar

T = TypeVar("T")

IDLE_S = 30.0
"""The helper thread ends after this long without work (the next hand-over starts it)."""


class Job(Generic[T]):
    """A part of a search, run by whichever comes first: the helper, or `result`'s
    caller (the helper was busy, or has not started it yet: a loaded machine gave it no
    core meanwhile, and waiting for it would cost more than running it here)."""

    __slots__ = ("_claim", "_done", "_error", "_fn", "_value")

    def __init__(self, fn: Callable[[], T]) -> None:
        self._fn = fn
        self._claim = threading.Lock()  # taken by whoever runs it
        self._done: threading.Lock | None = None  # held until the helper ran it
        self._value: T | None = None
        self._error: BaseException | None = None

    def result(self) -> T:
        """The part's value, its exception raised here: run here unless the helper
        started it (then waits for it)."""
        if self._claim.acquire(blocking=False):
            return self._fn()
        assert self._done is not None
        self._done.acquire()
        if self._error is not None:
            raise self._error
        return self._value  # type: ignore[return-value]

    def _run(self) -> bool:
        """Run it on the helper unless the caller took it; whether it ran here."""
        if not self._claim.acquire(blocking=False):
            return False
        try:
            self._value = self._fn()
        except BaseException as e:  # raised in the asking thread
            self._error = e
        return True


class Helper:
    """One thread running one `Job` at a time, for whoever finds it idle."""

    def __init__(self, name: str = "memoryd-search-helper", idle_s: float = IDLE_S) -> None:
        self._name = name
        self._idle_s = idle_s
        self._busy = threading.Lock()  # held from a hand-over until its job is done
        self._go = threading.Lock()    # released to hand a job over
        self._go.acquire()
        self._job: Job | None = None
        self._thread: threading.Thread | None = None
        self._askers = 0  # searches running (`asking`)
        self._count = threading.Lock()
        self.ran = 0  # jobs the helper ran, not its callers (tests, benches)

    @contextmanager
    def asking(self) -> Iterator[None]:
        """Around one request (a search, a context): while another runs too, no part is
        handed over."""
        with self._count:
            self._askers += 1
        try:
            yield
        finally:
            with self._count:
                self._askers -= 1

    def start(self, fn: Callable[[], T]) -> Job[T]:
        """`fn` as a job, handed to the helper if it is idle and no other search is
        `asking`."""
        job: Job[T] = Job(fn)
        if self._askers > 1 or not self._busy.acquire(blocking=False):
            return job
        if self._thread is None:  # read and set under `_busy`, as the thread clears it
            self._thread = threading.Thread(target=self._run, name=self._name, daemon=True)
            self._thread.start()
        job._done = threading.Lock()
        job._done.acquire()
        self._job = job
        self._go.release()
        return job

    def _run(self) -> None:
        while True:
            if not self._go.acquire(timeout=self._idle_s):
                if self._busy.acquire(blocking=False):  # no hand-over under way: end
                    self._thread = None
                    self._busy.release()
                    return
                continue  # a hand-over under way: its job comes next
            job, self._job = self._job, None
            assert job is not None and job._done is not None
            ran = job._run()
            self.ran += ran
            self._busy.release()
            if ran:
                job._done.release()
