"""Temp files of memory-folder writes a kill -9 cut short: each kind is removed under the
lock its writes hold while their temp file exists (the daily notes' `.notes.lock`,
`.HISTORY.md.lock`; MEMORY.md's own, tests/memory/test_memory.py), at the daemon's start
and before retention folds notes. A live write's temp file is never taken: whoever
cleans waits for the lock. Seen in CI: kill -9 during a first start's consolidation
left `.2026-07-05.md.<x>.tmp` in the folder for good."""

from __future__ import annotations

import threading

import pytest

from memoryd.errors import MemorydError
from memoryd.memory import daily, history
from memoryd.memory.locked import hold
from memoryd.paths import resolve_paths
from tests.helpers import running_daemon


def leftovers(d):
    note = d / ".2026-07-05.md.42awhwcb.tmp"
    hist = d / ".HISTORY.md.k9x2ab.tmp"
    mem = d / ".MEMORY.md.zz.tmp"
    for p, text in ((note, "# 2026-07-05\n- half"), (hist, "## 2026"), (mem, "x")):
        p.write_text(text)
    return note, hist, mem


def test_each_kind_is_removed_under_its_own_lock(tmp_path):
    d = tmp_path / "memory"
    d.mkdir()
    (d / "2026-07-05.md").write_text("# 2026-07-05\n")
    note, hist, mem = leftovers(d)
    assert daily.clean_temps(d) == [note.name]
    assert history.clean_temps(d) == [hist.name]
    assert mem.exists() and (d / "2026-07-05.md").exists()  # MemoryFile's, and the note


def test_a_live_writes_temp_file_is_not_taken(tmp_path):
    """A writer holding the notes' lock (another thread here; another daemon sharing the
    folder alike) keeps its temp file: the cleaner waits for the lock, and gives up
    after its timeout without touching the file."""
    d = tmp_path / "memory"
    d.mkdir()
    note, _, _ = leftovers(d)
    held, release = threading.Event(), threading.Event()

    def writer() -> None:
        with hold(daily.lock_path(d)):
            held.set()
            release.wait(10)

    t = threading.Thread(target=writer)
    t.start()
    try:
        assert held.wait(10)
        with pytest.raises(MemorydError):
            daily.clean_temps(d, timeout=0.2)
        assert note.exists()
    finally:
        release.set()
        t.join()
    assert daily.clean_temps(d) == [note.name]


async def test_the_daemons_start_removes_what_killed_writes_left(memoryd_home, sock,
                                                                 tmp_path):
    d = resolve_paths(memoryd_home).memory_dir
    d.mkdir(parents=True, exist_ok=True)
    note, hist, mem = leftovers(d)
    (tmp_path / "src").mkdir()
    async with running_daemon(memoryd_home, [("generic", tmp_path / "src")], sock):
        assert not note.exists() and not hist.exists() and not mem.exists()
