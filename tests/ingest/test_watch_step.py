"""The watch's wake-up step (issue 11, idle CPU and append -> searchable): fast while
files change; after a quiet spell it waits on an inotify wake-up (Linux) and takes the
first change at the fast step, or, without one, steps slowly and still sees it. Real files
in a real watched directory."""

import asyncio
import os
import sys
import time

import pytest

from memoryd.ingest import inotify_wake
from memoryd.ingest.watcher import watch_changes


async def _next(gen, timeout=10.0):
    return await asyncio.wait_for(gen.__anext__(), timeout)


async def test_changes_before_and_after_a_quiet_spell(tmp_path):
    stop = asyncio.Event()
    gen = watch_changes((tmp_path,), lambda c, p: p.endswith(".jsonl"), debounce_ms=20,
                        stop=stop, force_polling=None, fast_ms=20, slow_ms=200, quiet_s=0.4,
                        wake=False)
    f = tmp_path / "a.jsonl"
    first = asyncio.ensure_future(_next(gen))
    await asyncio.sleep(0.3)  # the notifier is watching
    f.write_text('{"role": "user", "content": "one"}\n')
    assert any(p == str(f) for _, p in await first)
    await asyncio.sleep(1.0)  # quiet: the step is slow now
    t0 = time.monotonic()
    second = asyncio.ensure_future(_next(gen))
    with f.open("a") as out:
        out.write('{"role": "user", "content": "two"}\n')
    assert any(p == str(f) for _, p in await second)
    assert time.monotonic() - t0 < 5  # within a couple of slow steps (a loaded machine)
    (tmp_path / "notes.txt").write_text("not a transcript")  # filtered out
    third = asyncio.ensure_future(_next(gen))
    await asyncio.sleep(0.5)
    stop.set()  # the watch ends within a step
    try:
        await asyncio.wait_for(third, 5)
        raise AssertionError("a filtered-out change was yielded")
    except StopAsyncIteration:
        pass


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="inotify is Linux's")
async def test_the_first_change_after_a_quiet_spell_wakes_the_watch(tmp_path):
    """With a slow step of a minute, a change after the quiet spell could only come back
    within the test's bound through the wake-up; so can one in a directory made while
    the watch rested (the parent's watch sees the directory appear)."""
    stop = asyncio.Event()
    gen = watch_changes((tmp_path,), lambda c, p: True, debounce_ms=20, stop=stop,
                        force_polling=None, fast_ms=20, slow_ms=60_000, quiet_s=0.3)
    f = tmp_path / "a.jsonl"
    first = asyncio.ensure_future(_next(gen, 30))
    await asyncio.sleep(1.0)  # quiet by now: waiting on the wake-up
    f.write_text('{"role": "user", "content": "one"}\n')
    assert any(p == str(f) for _, p in await first)
    await asyncio.sleep(1.0)  # quiet again: a fresh wake-up armed
    second = asyncio.ensure_future(_next(gen, 30))
    (tmp_path / "later").mkdir()
    assert any(p == str(tmp_path / "later") for _, p in await second)
    stop.set()
    with pytest.raises(StopAsyncIteration):
        await asyncio.wait_for(gen.__anext__(), 30)


def test_no_wake_up_where_inotify_refuses(tmp_path, monkeypatch):
    monkeypatch.setattr(inotify_wake, "MAX_DIRS", 2)
    for i in range(3):
        (tmp_path / f"d{i}").mkdir()
    assert inotify_wake.arm((tmp_path,)) is None  # the watch keeps its slow step
    monkeypatch.setattr(inotify_wake, "MAX_DIRS", 100)
    w = inotify_wake.arm((tmp_path,))
    if sys.platform.startswith("linux"):
        assert w is not None
        (tmp_path / "d1" / "x.jsonl").write_text("{}\n")
        assert os.read(w.fd, 65536)  # the kernel said so
        w.close()


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="inotify is Linux's")
async def test_a_rung_change_is_collected_at_the_quick_step(tmp_path):
    """With every step and the debounce at a minute, only the doorbell and its quick step
    can bring a change back within the test's bound: a file, then a directory made
    during the watch, then a file in that directory (which rings only because the new
    directory was added to the doorbell)."""
    stop = asyncio.Event()
    gen = watch_changes((tmp_path,), lambda c, p: True, debounce_ms=60_000, stop=stop,
                        force_polling=None, fast_ms=60_000, slow_ms=60_000, quiet_s=60)
    first = asyncio.ensure_future(_next(gen, 30))
    await asyncio.sleep(0.5)  # armed, waiting on the doorbell
    (tmp_path / "a.jsonl").write_text('{"role": "user", "content": "one"}\n')
    assert any(p == str(tmp_path / "a.jsonl") for _, p in await first)
    await asyncio.sleep(0.2)  # a calm: the next ring is collected at the quick step
    second = asyncio.ensure_future(_next(gen, 30))
    (tmp_path / "later").mkdir()
    assert any(p == str(tmp_path / "later") for _, p in await second)
    await asyncio.sleep(0.2)
    third = asyncio.ensure_future(_next(gen, 30))
    (tmp_path / "later" / "b.jsonl").write_text('{"role": "user", "content": "two"}\n')
    assert any(p == str(tmp_path / "later" / "b.jsonl") for _, p in await third)
    stop.set()
    with pytest.raises(StopAsyncIteration):
        await asyncio.wait_for(gen.__anext__(), 30)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="inotify is Linux's")
async def test_the_watch_steps_when_inotify_refuses_a_new_directory(tmp_path, monkeypatch):
    """No watches left for a directory made during the watch: the watch goes on by
    stepping, and still sees changes in it."""
    monkeypatch.setattr(inotify_wake, "MAX_DIRS", 2)
    stop = asyncio.Event()
    gen = watch_changes((tmp_path,), lambda c, p: True, debounce_ms=20, stop=stop,
                        force_polling=None, fast_ms=20, slow_ms=100, quiet_s=60)
    first = asyncio.ensure_future(_next(gen, 30))
    await asyncio.sleep(0.5)
    (tmp_path / "d1" / "d2").mkdir(parents=True)  # the third directory: refused
    assert any(p.startswith(str(tmp_path / "d1")) for _, p in await first)
    await asyncio.sleep(0.3)
    second = asyncio.ensure_future(_next(gen, 30))
    (tmp_path / "d1" / "d2" / "c.jsonl").write_text('{"role": "user", "content": "x"}\n')
    seen: set[str] = set()
    while str(tmp_path / "d1" / "d2" / "c.jsonl") not in seen:
        seen |= {p for _, p in await (second if not seen else _next(gen, 30))}
    stop.set()
