"""The search helper (`memoryd.index.helper`): one persistent thread a search hands an
independent part to; a part it cannot take at once runs in the asking thread."""

from __future__ import annotations

import threading
import time

import pytest

from memoryd.index.helper import Helper


def _until(cond, timeout=5.0):
    end = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < end, "timed out"
        time.sleep(0.001)


def test_an_idle_helper_runs_the_part_on_its_own_thread_and_keeps_that_thread():
    h = Helper(name="test-helper")
    seen = []
    for i in range(3):
        job = h.start(lambda i=i: (seen.append(threading.current_thread()), i * 2)[1])
        _until(lambda i=i: h.ran == i + 1)  # taken by the helper before we ask
        assert job.result() == i * 2
    assert [t.name for t in seen] == ["test-helper"] * 3
    assert seen[0] is seen[1] is seen[2]  # one thread, not one per part


def test_a_part_the_helper_cannot_take_runs_in_the_asking_thread():
    """While the helper runs one request's part, another's is not queued behind it: the
    asking thread runs it when it asks for the result."""
    h = Helper()
    started, release = threading.Event(), threading.Event()
    first = h.start(lambda: (started.set(), release.wait(5), threading.current_thread())[2])
    assert started.wait(5)
    second = h.start(threading.current_thread)
    assert second.result() is threading.current_thread()
    release.set()
    assert first.result() is not threading.current_thread()
    assert h.ran == 1


def test_a_parts_exception_reaches_the_asking_thread():
    h = Helper()

    def boom():
        raise ValueError("bad query")

    job = h.start(boom)
    _until(lambda: h.ran == 1)
    with pytest.raises(ValueError, match="bad query"):
        job.result()
    assert h.start(lambda: 7).result() == 7  # the helper goes on


def test_the_helper_thread_ends_when_idle_and_comes_back_when_needed():
    h = Helper(name="test-idle-helper", idle_s=0.05)

    def helpers():
        return [t for t in threading.enumerate() if t.name == "test-idle-helper"]

    job = h.start(lambda: 1)
    _until(lambda: h.ran == 1)
    assert job.result() == 1 and len(helpers()) == 1
    _until(lambda: not helpers())  # an idle daemon holds no thread for it
    job = h.start(lambda: 2)
    _until(lambda: h.ran == 2)
    assert job.result() == 2 and len(helpers()) == 1


def test_while_two_searches_run_each_keeps_its_parts_in_its_own_thread():
    """Two searches at once have a core each already: no part is handed over then."""
    h = Helper()
    other = threading.Event()
    done = threading.Event()

    def search_beside():
        with h.asking():
            other.set()
            done.wait(5)

    t = threading.Thread(target=search_beside)
    t.start()
    try:
        assert other.wait(5)
        with h.asking():
            job = h.start(threading.current_thread)
            assert job.result() is threading.current_thread() and h.ran == 0
    finally:
        done.set()
        t.join()
    with h.asking():  # alone again
        job = h.start(threading.current_thread)
        _until(lambda: h.ran == 1)
        assert job.result() is not threading.current_thread()
