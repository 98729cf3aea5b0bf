"""The real daemon in fleet mode (`[store] url = postgresql://…`): a watched directory is
ingested into PostgreSQL end to end, searched, and the password shows nowhere."""

from __future__ import annotations

import json
import logging

import psycopg

from memoryd.config import load_settings
from memoryd.daemon import Daemon
from memoryd.paths import resolve_paths
from tests.helpers import AsyncClient, caught_up, ctl, wait_for, write_jsonl


def msg(i: int, text: str) -> dict:
    return {"role": "user" if i % 2 == 0 else "assistant", "content": text, "id": f"m{i}"}


async def test_daemon_ingests_a_watched_dir_into_postgresql(memoryd_home, sock, src, pg_url,
                                                            pg_server, caplog, capsys):
    caplog.set_level(logging.DEBUG)
    write_jsonl(src / "proj" / "s1.jsonl", [msg(0, "the quokka migration plan"),
                                            msg(1, "noted, 记住 中文 works too")])
    settings = load_settings(None, environ={}, overrides={
        "watch": {"sources": [{"agent": "generic", "path": src}], "default_sources": False,
                  "reconcile_seconds": 0.3},
        "server": {"socket": sock, "tcp_port": 0}, "embed": {"enabled": False},
        "store": {"url": pg_url, "machine": "laptop", "namespace": "team"}})
    d = Daemon(settings, resolve_paths(memoryd_home), environ={})
    await d.start()
    try:
        c = AsyncClient(sock)
        st = await wait_for(lambda: caught_up(c))
        assert st["units"] == 2 and st["sessions"] == 1
        assert st["store"]["kind"] == "postgresql" and st["store"]["namespace"] == "team"
        assert st["store"]["machine"] == "laptop" and "***" in st["store"]["url"]
        r = await c.search(query="quokka")
        assert r["total"] == 1 and r["results"][0]["session_id"] == "proj/s1"
        write_jsonl(src / "proj" / "s1.jsonl", [msg(2, "appended wombat line")])

        async def found():
            r = await c.search(query="wombat")
            return r if r["total"] else None

        await wait_for(found, timeout=10)
        code, out, err = await ctl(capsys, sock, "status")
        code_j, out_j, _ = await ctl(capsys, sock, "status", "--json")
        shown = json.dumps(await c.status()) + out + err + out_j
        assert code == 0 and code_j == 0
    finally:
        await d.stop()
    with psycopg.connect(pg_url) as conn:
        rows = conn.execute("SELECT u.content FROM memoryd_team.units u "
                            "ORDER BY u.id").fetchall()
        cursor = conn.execute("SELECT \"offset\", size FROM memoryd_team.files").fetchone()
    assert [r[0] for r in rows] == ["the quokka migration plan", "noted, 记住 中文 works too",
                                    "appended wombat line"]
    assert cursor[0] == cursor[1] > 0  # the cursor advanced with the units
    assert pg_server.password not in shown
    assert pg_server.password not in caplog.text
    assert "postgresql://" in caplog.text  # the store was named, masked
