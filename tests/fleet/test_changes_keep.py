"""`[store] changes_keep_days`: how long the change feed keeps rows for a machine that is
away. A real daemon on a real PostgreSQL runs its hourly `changes_prune` job: with the
default 7 days a machine away for 2 days holds the rows back; with 1 day it is passed."""

from __future__ import annotations

import datetime as dt

import psycopg

from memoryd.daemon import Daemon
from memoryd.fleet import changefeed as cf
from memoryd.paths import resolve_paths
from tests.helpers import AsyncClient, short_dir, wait_for, write_jsonl
from tests.consolidate.test_consolidate import ingested, msgs, settings

SCHEMA = "memoryd_team"


def changes(url: str) -> int:
    with psycopg.connect(url) as conn:
        return conn.execute(f"SELECT count(*) FROM {SCHEMA}.changes").fetchone()[0]


async def test_the_changes_prune_keeps_rows_for_changes_keep_days(tmp_path, pg_url):
    src = tmp_path / "src"
    src.mkdir()
    with short_dir() as d:
        sock = d / "m.sock"
        s = settings(src, sock, store={"url": pg_url, "machine": "laptop",
                                       "namespace": "team", "changes_keep_days": 1})
        assert s.store.changes_keep_days == 1
        daemon = Daemon(s, resolve_paths(tmp_path / "home"), environ={})
        await daemon.start()
        try:
            write_jsonl(src / "p" / "a.jsonl", msgs("a", dt.date.today().isoformat(),
                                                    [("user", "keep the feed short")] * 3))
            await ingested(AsyncClient(sock), 3)
            with psycopg.connect(pg_url, autocommit=True) as conn:
                # a machine last seen 2 days ago, its position before every change
                conn.execute(f"INSERT INTO {SCHEMA}.change_positions (machine, position,"
                             " updated_at) VALUES ('away', '1:1:', now() - interval '2 days')")
                assert cf.prune(conn, SCHEMA) == 0  # the default 7 days: it holds them
            assert changes(pg_url) > 0
            async def pruned() -> bool:  # once this machine has reported its position
                await daemon.schedule.run_now("changes_prune")
                return changes(pg_url) == 0
            await wait_for(pruned, timeout=30, interval=0.5)
        finally:
            await daemon.stop()
