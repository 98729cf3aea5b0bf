"""Issue 10, item 4: progress of a long backfill, in status, memoryctl and the log."""

from __future__ import annotations

import asyncio
import json
import logging

from memoryd.ingest.backfill import BackfillProgress, log_progress, read_paths_since
from memoryd.cli.commands import main
from tests.helpers import AsyncClient, running_daemon, wait_for, write_jsonl


def test_backfill_progress_rate_and_eta():
    p = BackfillProgress(started=100.0)
    p.update(files_read=4, bytes_read=250, pending_files=6, unread_bytes=750)
    s = p.snapshot(now=105.0)
    assert (s["files_done"], s["files_total"], s["bytes_done"], s["bytes_total"]) == (
        4, 10, 250, 1000)
    assert s["percent"] == 25.0 and s["rate_bytes_s"] == 50.0 and s["eta_s"] == 15.0
    assert not s["done"]
    p.update(files_read=4, bytes_read=250, pending_files=6, unread_bytes=950)  # a live append
    assert p.snapshot(now=105.0)["bytes_total"] == 1200
    assert "4/10 files" in p.line(now=105.0)
    fresh = BackfillProgress(started=1.0)
    fresh.update(files_read=0, bytes_read=0, pending_files=1, unread_bytes=5)
    assert fresh.snapshot(now=1.0)["eta_s"] is None  # nothing read yet: no rate, no guess
    p.finish(now=110.0)
    s = p.snapshot(now=500.0)
    assert s["done"] and s["eta_s"] == 0.0 and s["elapsed_s"] == 10.0 and s["percent"] == 100


def test_read_since_counts_new_and_grown_files():
    class S:
        def __init__(self, offset):
            self.offset = offset

    seen = {"a": S(100), "b": S(50), "c": S(10)}
    # b grew by 30, c is new
    assert read_paths_since({"a": 100, "b": 20}, seen) == ({"b", "c"}, 40)


async def test_backfill_progress_lines_in_the_log(caplog):
    p = BackfillProgress()
    calls = []

    async def refresh():
        calls.append(1)
        p.update(files_read=1, bytes_read=1024, pending_files=1, unread_bytes=1024)
        if len(calls) == 2:
            p.finish()

    with caplog.at_level(logging.INFO, logger="memoryd.ingest.backfill"):
        await asyncio.wait_for(log_progress(p, refresh, interval=0.01), 5)
    assert "backfill: 1/2 files, 1.0 KB/2.0 KB (50%)" in caplog.text


async def test_backfill_progress_in_status_and_watch(memoryd_home, sock, tmp_path, capsys,
                                                     caplog):
    src = tmp_path / "src"
    for i in range(3):
        write_jsonl(src / f"s{i}.jsonl", [{"role": "user", "content": f"line {j} of {i}",
                                           "id": f"{i}-{j}"} for j in range(50)])
    size = sum(p.stat().st_size for p in src.iterdir())
    # the backfill logs as memoryd.ingest.backfill: INFO for the whole package, or the
    # test passed only after another had set memoryd's level (alone, it failed)
    with caplog.at_level(logging.INFO, logger="memoryd"):
        async with running_daemon(memoryd_home, [("generic", src)], sock):
            c = AsyncClient(sock)
            st = await wait_for(lambda: _caught_up(c))
            b = st["backfill"]
            assert b["done"] and b["files_total"] == b["files_done"] == 3
            assert b["bytes_total"] == b["bytes_done"] == size and b["eta_s"] == 0
            code = await asyncio.to_thread(main, ["--socket", str(sock), "status"])
            out = capsys.readouterr().out
            assert code == 0 and "backfill 3/3 files" in out and "done in" in out
            code = await asyncio.to_thread(main, ["--socket", str(sock), "status", "--watch"])
            out = capsys.readouterr().out
            assert code == 0 and out.startswith("[" + "#" * 30 + "] 3/3 files")
            assert "caught up" in out
            code = await asyncio.to_thread(main, ["--socket", str(sock), "--json", "status",
                                                  "--watch"])
            assert json.loads(capsys.readouterr().out)["backfill"]["done"]
    assert "backfill: 3 files, " in caplog.text and "backfill done: 3 files read" in caplog.text


async def _caught_up(c):
    st = await c.status()
    return st if st["caught_up"] else None
