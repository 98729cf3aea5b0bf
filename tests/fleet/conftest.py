"""A fresh database of the session's real PostgreSQL server holding one namespace's
schema with a minimal `units` table and the change feed (tests/fleet/feed.py)."""

from __future__ import annotations

import pytest

from tests.fleet.feed import Feed, create_feed


@pytest.fixture
def feed(pg_url) -> Feed:
    return create_feed(pg_url)
