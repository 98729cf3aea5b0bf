"""The daily notes and HISTORY.md are written under MEMORY.md's rule (file lock, re-read
before write): an edit saved while a write is planned is planned on, never overwritten;
another process holding the lock is waited for and what it wrote is kept; and two real
daemons of one namespace sharing one memory folder (one machine's home, the folder
linked into the other's) consolidating the same day at once write each item once."""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import subprocess
import sys
from pathlib import Path

from memoryd.memory import daily, history
from memoryd.consolidate.clock import SettableClock
from memoryd.memory.locked import edit_locked
from memoryd.daemon import Daemon
from memoryd.paths import resolve_paths
from tests.helpers import AsyncClient, short_dir, wait_for, write_jsonl
from tests.memory.test_fleet_memory import DAY, S2, read, units
from tests.consolidate.test_consolidate import DAY1, msgs, settings

USER = "- my own line, written in an editor\n"

# another process (another daemon sharing the folder) holds the notes' lock for a while
# and appends a line meanwhile
HOLDER = """
import fcntl, os, sys, time
fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT, 0o600)
fcntl.flock(fd, fcntl.LOCK_EX)
print("held", flush=True)
sys.stdin.readline()
with open(sys.argv[2], "a", encoding="utf-8") as f:
    f.write(sys.argv[3])
os.close(fd)
"""


def test_an_edit_saved_while_the_write_is_planned_is_planned_on(tmp_path):
    path = tmp_path / "2026-10-05.md"
    path.write_text("# 2026-10-05\n\n## Topics\n- first\n", encoding="utf-8")
    calls: list[str | None] = []

    def plan(text: str | None) -> tuple[str | None, int]:
        calls.append(text)
        if len(calls) == 1:  # the user saves in an editor while we plan
            path.write_text((text or "") + USER, encoding="utf-8")
        return (text or "") + "- ours\n", len(calls)

    assert edit_locked(path, tmp_path / daily.LOCK, plan) == 2  # planned again on theirs
    assert path.read_text(encoding="utf-8") == \
        "# 2026-10-05\n\n## Topics\n- first\n" + USER + "- ours\n"
    # HISTORY.md: an append keeps what is there and is idempotent
    (tmp_path / history.FILENAME).write_text(history.HEADER + USER, encoding="utf-8")
    assert history.append(tmp_path, ["- a moved line"]) == ["- a moved line"]
    assert history.append(tmp_path, ["- a moved line"]) == []
    assert history.read(tmp_path) == history.HEADER + USER + "- a moved line\n"


async def test_two_daemons_sharing_a_memory_folder_consolidate_one_day_once(tmp_path, pg_url):
    srcs = {"laptop": tmp_path / "la", "server": tmp_path / "sv"}
    write_jsonl(srcs["laptop"] / "shelfie" / "s1.jsonl", msgs("s1", DAY, DAY1))
    write_jsonl(srcs["server"] / "shelfie" / "s2.jsonl", msgs("s2", DAY, S2, hour=9))
    folder = tmp_path / "laptop" / "data" / "memory"
    folder.mkdir(parents=True, mode=0o700)
    (tmp_path / "server" / "data").mkdir(parents=True, mode=0o700)
    (tmp_path / "server" / "data" / "memory").symlink_to(folder)  # one folder for both
    note = folder / f"{DAY}.md"
    note.write_text(f"# {DAY}\n\n## Topics\n{USER}", encoding="utf-8")
    clock = SettableClock(dt.datetime(2026, 10, 5, 22, tzinfo=dt.UTC).timestamp())
    holder: subprocess.Popen | None = None
    try:
        async with contextlib.AsyncExitStack() as stack:
            d = stack.enter_context(short_dir())
            clients: list[AsyncClient] = []
            for name, src in srcs.items():
                s = settings(src, d / f"{name}.sock", store={
                    "url": pg_url, "machine": name, "namespace": "team"})
                dm = Daemon(s, resolve_paths(tmp_path / name), environ={}, clock=clock)
                await dm.start()
                stack.push_async_callback(dm.stop)
                clients.append(AsyncClient(d / f"{name}.sock"))
            for c in clients:
                await units(c, len(DAY1) + len(S2))
            holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(folder / daily.LOCK),
                                       str(note), "- held: written under the lock\n"],
                                      stdin=subprocess.PIPE, stdout=subprocess.PIPE)
            assert await asyncio.to_thread(holder.stdout.readline) == b"held\n"
            runs = [asyncio.create_task(c.run_job("consolidate", {"date": DAY}))
                    for c in clients]
            await asyncio.sleep(1.0)  # both wait on the lock the other process holds
            holder.stdin.write(b"go\n")
            holder.stdin.flush()
            await asyncio.to_thread(holder.wait, 30)
            await asyncio.gather(*runs)

            def settled() -> bool:
                text = read(folder, note.name)
                return "Redis" in text and "ISBN" in text
            await wait_for(settled, timeout=30, interval=0.2)
    finally:
        if holder is not None:
            if holder.poll() is None:
                holder.kill()
            holder.wait(5)
            for pipe in (holder.stdin, holder.stdout):
                pipe.close()
    text = read(folder, note.name)
    items = [ln for ln in text.splitlines() if ln.startswith("- ")]
    assert len(items) == len(set(items)), text  # each item once
    held = "- held: written under the lock"
    assert USER.strip() in items and held in items, text
    # the daemons wrote after the other process let go of the lock, on top of its line
    assert items.index(held) < len(items) - 1, text
    lines = [ln for ln in read(folder).splitlines() if ln.strip()]
    assert len(lines) == len(set(lines)) and read(folder).count("Conventional Commits") == 1
    assert Path(tmp_path / "server" / "data" / "memory").resolve() == folder.resolve()
