"""A fresh database of the session's real PostgreSQL server holding one namespace's
schema with a minimal `units` table and the change feed (tests/fleet/feed.py)."""

from __future__ import annotations

from urllib.parse import unquote, urlsplit, urlunsplit

import pytest

from tests.fleet.feed import Feed, create_feed


@pytest.fixture
def feed(pg_url) -> Feed:
    return create_feed(pg_url)


@pytest.fixture
def flag_url(pg_url, monkeypatch) -> str:
    """`pg_url` as a user gives it on a command line: without its password, which goes
    in PGPASSWORD (a password in a flag is refused: every local user can read argv)."""
    parts = urlsplit(pg_url)
    monkeypatch.setenv("PGPASSWORD", unquote(parts.password or ""))
    host = parts.netloc.rpartition("@")[2]
    return urlunsplit(parts._replace(netloc=f"{parts.username}@{host}"))
