"""The watch's wake-up step (issue 11, idle CPU): fast while files change, slow after a
quiet spell, and a change after the quiet spell is still seen, on real files in a real
watched directory."""

import asyncio
import time

from memoryd.watcher import watch_changes


async def _next(gen, timeout=10.0):
    return await asyncio.wait_for(gen.__anext__(), timeout)


async def test_changes_before_and_after_a_quiet_spell(tmp_path):
    stop = asyncio.Event()
    gen = watch_changes((tmp_path,), lambda c, p: p.endswith(".jsonl"), debounce_ms=20,
                        stop=stop, force_polling=None, fast_ms=20, slow_ms=200, quiet_s=0.4)
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
