"""A source added by SIGHUP is read at once, not at the next reconciliation, and status
(JSON and `memoryctl status`) lists it (issue 28 item 15). A real daemon on a real
socket; the reconciliation is an hour away, so only the reload can have read it."""

from __future__ import annotations

from memoryd.daemon import Daemon
from memoryd.paths import resolve_paths
from tests.helpers import AsyncClient, ctl, settings_for, short_dir, wait_for, write_jsonl


async def test_issue_28_a_source_added_by_sighup_is_read_at_once_and_listed(
        memoryd_home, tmp_path, capsys):
    first, added = tmp_path / "first", tmp_path / "added"
    write_jsonl(first / "a.jsonl", [{"role": "user", "content": "alpha walrus"}])
    write_jsonl(added / "b.jsonl", [{"role": "user", "content": "bravo pelican"}])
    with short_dir() as d:
        sock = d / "m.sock"
        before = settings_for([("generic", first)], sock, reconcile_seconds=3600)
        after = settings_for([("generic", first), ("generic", added)], sock,
                             reconcile_seconds=3600)
        daemon = Daemon(before, resolve_paths(memoryd_home), environ={},
                        load_settings=lambda: after)
        await daemon.start()
        try:
            c = AsyncClient(sock)
            await wait_for(lambda: _found(c, "walrus"), timeout=60)
            daemon.request_reload()  # what SIGHUP does
            await wait_for(lambda: _found(c, "pelican"), timeout=60)
            st = await c.status()
            assert str(added) in [s["path"] for s in st["sources"]]
            code, out, _ = await ctl(capsys, sock, "status")
            assert code == 0 and f"source   generic {added}" in out
        finally:
            await daemon.stop()


async def _found(c, word):
    return (await c.search(query=word))["total"] >= 1 or None
