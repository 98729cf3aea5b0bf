"""glibc's mmap threshold held low while the index writer works through a backlog (a
backfill, a rebuild) and raised once it rests (issue 11 item 3): a backfill's large
transient buffers are mappings, unmapped when freed, instead of leaving holes in the
heaps. Run in a fresh interpreter each (malloc's settings are the process's): a real
store and index, more units than a live pass, and where each block really came from
(glibc marks a mapped chunk in its size word)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

SCRIPT = r'''
import asyncio, ctypes, json, sys, time
from pathlib import Path
from memoryd.runtime import idle_release as ir
from memoryd.index import indexer
from memoryd.models import Record
from memoryd.daemon.store_index import open_store
from memoryd.store.sessions import session_pk
from memoryd.store.units import store_record

c = ir.libc()
c.malloc.restype, c.malloc.argtypes = ctypes.c_void_p, [ctypes.c_size_t]
c.free.argtypes = [ctypes.c_void_p]


def mapped(n):
    """Whether a block of n bytes comes from its own mapping (IS_MMAPPED in its size word)."""
    p = c.malloc(n)
    bit = ctypes.c_size_t.from_address(p - ctypes.sizeof(ctypes.c_size_t)).value & 2
    c.free(p)
    return bool(bit)


async def main():
    out = {"tuned": ir.tune_malloc()}
    indexer.WRITER_IDLE_S = 0.2
    s = await open_store(Path(sys.argv[1]))
    try:
        def put(n, base=0):
            def fn(conn):
                pk = session_pk(conn, "generic", "s", project="/p")
                for i in range(base, base + n):
                    store_record(conn, pk, Record("user", f"note {i} 部署 rollout"), f"r{i}",
                                 None, 0)
            return fn

        await s.write(put(indexer.LIVE_UNITS + 100))
        await s.indexed()
        out["burst"] = ir.RELEASE.status()["malloc"]
        out["burst_mapped"] = mapped(512 << 10)
        deadline = time.monotonic() + 30
        while ir.RELEASE.settles < 1 and time.monotonic() < deadline:  # the writer rests
            await asyncio.sleep(0.05)
        out["rest"] = ir.RELEASE.status()["malloc"]
        out["rest_mapped"] = [mapped(512 << 10), mapped(8 << 20)]
        out["again"] = ir.malloc_burst(False)
        await s.write(put(indexer.LIVE_UNITS + 100, 1000))  # a second backlog
        await s.indexed()
        out["second"] = ir.RELEASE.status()["malloc"]
        await s.write(put(1, 5000))  # then one live line, the writer still open
        await s.indexed()
        out["live"] = [ir.RELEASE.status()["malloc"], s.index.has_writer()]
    finally:
        await s.close()
        ir.RELEASE.cancel()
    print(json.dumps(out))

asyncio.run(main())
'''


def run(tmp_path, **env) -> dict:
    base = {k: v for k, v in os.environ.items()
            if k not in ("MALLOC_ARENA_MAX", "GLIBC_TUNABLES", "MALLOC_MMAP_THRESHOLD_")}
    out = subprocess.run([sys.executable, "-c", SCRIPT, str(tmp_path / "m.db")],
                         env={**base, **env}, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.splitlines()[-1])


def test_a_backlog_maps_large_blocks_until_the_writer_rests(tmp_path):
    from memoryd.runtime.idle_release import BURST_MMAP_THRESHOLD, REST_MMAP_THRESHOLD

    out = run(tmp_path)
    assert out["tuned"] == {"arena_max": 2}
    assert out["burst"] == {"arena_max": 2, "mmap_threshold": BURST_MMAP_THRESHOLD}
    assert out["burst_mapped"] is True
    rest = {"arena_max": 2, "mmap_threshold": REST_MMAP_THRESHOLD}
    assert out["rest"] == rest
    assert out["rest_mapped"] == [False, False]  # a search's buffers come from the heap
    assert out["again"] is None  # already at rest: nothing set twice
    assert out["second"] == {**rest, "mmap_threshold": BURST_MMAP_THRESHOLD}
    # a live pass ends the burst at once, not only the writer's rest
    assert out["live"] == [rest, True]


def test_the_operators_own_malloc_settings_are_left_alone(tmp_path):
    out = run(tmp_path, MALLOC_ARENA_MAX="4")
    assert out["tuned"] == {} and out["burst"] == {} and out["rest"] == {}
    assert out["second"] == {} and out["live"][0] == {}
