"""The operator's view of the store in SQLite mode: `/v1/status`, `memoryctl status` and
`/metrics` say which store the daemon uses (kind and the database file)."""

from __future__ import annotations

from memoryd.cli.output import render_status
from tests.helpers import AsyncClient, ctl, running_daemon


async def test_status_and_metrics_name_the_sqlite_store(tmp_path, sock, src, capsys):
    home = tmp_path / "home"
    async with running_daemon(home, [("generic", src)], sock) as d:
        c = AsyncClient(sock)
        st = (await c.status())["store"]
        assert st["kind"] == "sqlite" and st["path"] == str(d.paths.db)
        assert st["namespace"] == "default" and st["machine"]
        code, out, _ = await ctl(capsys, sock, "status")
        assert code == 0 and f"truth    sqlite {d.paths.db}" in out
        metrics = await c.request("GET", "/metrics")
        assert f'memoryd_store_info{{kind="sqlite",machine="{st["machine"]}",' in metrics


def test_status_shows_a_postgresql_store_masked_with_its_namespace_and_machine():
    s = {"version": "x", "state": "running", "pid": 1, "uptime_s": 1, "socket": "/s",
         "sessions": 0, "units": 0, "files": 0, "ignored_files": 0, "bad_lines": 0,
         "caught_up": True, "backfill_done": True, "unread_bytes": 0, "queue_depth": 0,
         "sources": [], "ingest": {},
         "store": {"kind": "postgresql", "url": "postgresql://u:***@db/memory",
                   "namespace": "team_a", "machine": "laptop", "path": None}}
    assert ("truth    postgresql postgresql://u:***@db/memory, namespace team_a, "
            "machine laptop") in render_status(s)
