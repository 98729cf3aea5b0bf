"""Isolation by namespace, enforced by PostgreSQL's roles (docs/fleet.md): a role that
owns one namespace's schema cannot read another's, through memoryd or plain SQL."""

from __future__ import annotations

import secrets

import psycopg
import pytest

from memoryd.errors import StoreError
from memoryd.daemon.store_index import open_store
from memoryd.store import Store
from memoryd.store.sessions import count_sessions, session_pk
from memoryd.store_target import StoreTarget


async def test_a_role_confined_to_its_namespace_cannot_read_another(tmp_path, pg_server,
                                                                     pg_url):
    db = pg_url.rsplit("/", 1)[1]
    tag = secrets.token_hex(3)
    roles = {ns: (f"memoryd_{ns}_{tag}", secrets.token_urlsafe(9)) for ns in ("ta", "tb")}
    # the statements of docs/fleet.md, as the administrator
    pg_server.psql(f'REVOKE ALL ON DATABASE "{db}" FROM PUBLIC', db)
    pg_server.psql("REVOKE CREATE ON SCHEMA public FROM PUBLIC", db)
    for ns, (role, pw) in roles.items():
        pg_server.psql(f"CREATE ROLE {role} LOGIN PASSWORD '{pw}'", db)
        pg_server.psql(f'GRANT CONNECT ON DATABASE "{db}" TO {role}', db)
        pg_server.psql(f"CREATE SCHEMA memoryd_{ns} AUTHORIZATION {role}", db)

    def url(ns: str) -> str:
        role, pw = roles[ns]
        return pg_server.url(db, user=role, password=pw)

    opened: list[Store] = []
    try:
        b = await open_store(tmp_path / "b" / "memoryd.db",
                             target=StoreTarget(url=url("tb"), namespace="tb"))
        opened.append(b)
        await b.write(lambda c: session_pk(c, "codex", "team b's secret session"))
        a = await open_store(tmp_path / "a" / "memoryd.db",
                             target=StoreTarget(url=url("ta"), namespace="ta"))
        opened.append(a)
        assert await a.read(count_sessions) == 0 and await b.read(count_sessions) == 1
        # team a's credentials pointed at team b's namespace: refused by the database
        with pytest.raises(StoreError, match="permission denied for schema memoryd_tb"):
            await open_store(tmp_path / "a2" / "memoryd.db",
                             target=StoreTarget(url=url("ta"), namespace="tb"))
        with psycopg.connect(url("ta")) as conn, pytest.raises(
                psycopg.errors.InsufficientPrivilege, match="memoryd_tb"):
            conn.execute("SELECT session_id FROM memoryd_tb.sessions").fetchall()
    finally:
        for s in opened:
            await s.close()
        pg_server.drop_database(db)
        for role, _ in roles.values():
            pg_server.psql(f"DROP ROLE IF EXISTS {role}")
