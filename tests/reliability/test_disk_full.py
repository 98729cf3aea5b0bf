"""Issue 8 proof: the disk fills up under the store while transcripts keep arriving.

memoryd's data dir (memoryd.db, its WAL and the search index) is a small tmpfs, filled to
the last byte while a transcript is being ingested, so SQLite and the index get a real
ENOSPC. Ingest must stop advancing the file's cursor past what it stored, status must
say why (`caught_up: false`, the file listed as disk_full), and once space is back ingest
resumes by itself: every line stored once, searchable, no error left in status.

Mounting a tmpfs needs root (CI runs as root); elsewhere the test is skipped, saying so.
"""

from __future__ import annotations

import pytest

from memoryd.cli.output import render_status
from tests.helpers import AsyncClient, caught_up, fill, running_daemon, tmpfs, wait_for, write_jsonl

pytestmark = [pytest.mark.reliability, pytest.mark.timeout(900)]


def rows(n: int, tag: str) -> list[dict[str, str]]:
    return [{"role": "user" if i % 2 == 0 else "assistant", "id": f"{tag}{i}",
             "content": f"{tag}{i} quokka{tag}{i} 磁盘已满 " + "lorem ipsum dolor " * 60}
            for i in range(n)]


async def test_issue_8_disk_full_under_the_store_loses_nothing_and_resumes(
        memoryd_home, src, sock):
    with tmpfs(memoryd_home / "data", "24m") as data:
        write_jsonl(src / "before.jsonl", rows(20, "b"))
        async with running_daemon(memoryd_home, [("generic", src)], sock) as d:
            c = AsyncClient(sock)
            st = await wait_for(lambda: caught_up(c), timeout=60)
            assert st["units"] == 20
            junk = fill(data)
            big = src / "big.jsonl"
            write_jsonl(big, rows(300, "g"))

            async def failing():
                s = await c.status()
                return s if s["ingest"]["failing_files"] else None

            st = await wait_for(failing, timeout=60)
            (f,) = st["ingest"]["failing_files"]
            assert f["path"] == str(big) and f["kind"] == "disk_full", f
            assert not st["caught_up"] and st["unread_bytes"] > 0
            assert "full" in st["ingest"]["last_error"].lower()
            assert "FAILING" in render_status(st)

            # the cursor never passes what was stored: its offset is exactly the bytes
            # of the lines whose units are in the store
            def cursor(conn):
                fid, offset = conn.execute("SELECT id, offset FROM files WHERE path = ?",
                                           (str(big),)).fetchone() or (None, 0)
                n = conn.execute("SELECT count(*) FROM units WHERE file_id = ?",
                                 (fid,)).fetchone()[0] if fid else 0
                return offset, n

            offset, stored = await d.store.read(cursor)
            lines = big.read_bytes().splitlines(keepends=True)
            assert offset == sum(len(x) for x in lines[:stored]), (offset, stored)
            assert stored < 300

            junk.unlink()  # space is back: nothing to do but wait
            st = await wait_for(lambda: caught_up(c), timeout=120)
            assert st["units"] == 320, st["units"]
            assert st["ingest"]["failing_files"] == [] and st["ingest"]["last_error"] is None
            assert st["index"]["caught_up"] and not st["index"].get("error"), st["index"]
            assert "FAILING" not in render_status(st)

            def check(conn):
                ok = conn.execute("PRAGMA integrity_check").fetchone()[0]
                ids = [r[0] for r in conn.execute("SELECT record_id FROM units")]
                return ok, ids

            ok, ids = await d.store.read(check)
            assert ok == "ok"
            assert sorted(ids) == sorted([f"b{i}" for i in range(20)]
                                         + [f"g{i}" for i in range(300)])
            hits = (await c.search(query="quokkag299"))["results"]
            assert [h["record_id"] for h in hits][:1] == ["g299"], hits
