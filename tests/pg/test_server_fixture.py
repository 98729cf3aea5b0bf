"""The PostgreSQL fixture itself: a real server, password authentication, one fresh
database per test."""

from __future__ import annotations

import psycopg
import pytest


def test_a_fresh_database_accepts_the_password_and_nothing_else(pg_server, pg_url):
    with psycopg.connect(pg_url) as conn:
        assert conn.execute("SELECT current_database()").fetchone()[0].startswith("t_")
        assert conn.execute("SELECT count(*) FROM pg_tables WHERE schemaname = 'public'"
                            ).fetchone()[0] == 0
    wrong = pg_url.replace(pg_server.password, "not-the-password")
    with pytest.raises(psycopg.OperationalError, match="password authentication failed"):
        psycopg.connect(wrong).close()
