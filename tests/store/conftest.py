"""The store's tests run against both engines: every test that takes `store` (or
`open_store`) runs once on SQLite and once on a real PostgreSQL database."""

from __future__ import annotations

import pytest

from memoryd.daemon import store_index
from memoryd.store import Store
from memoryd.store_target import StoreTarget


@pytest.fixture(params=["sqlite", "postgresql"])
def engine(request):
    return request.param


@pytest.fixture
def target(engine, request):
    """The StoreTarget of this run: SQLite (the default) or a fresh PostgreSQL database."""
    if engine == "sqlite":
        return StoreTarget(machine="m1")
    return StoreTarget(url=request.getfixturevalue("pg_url"), machine="m1")


@pytest.fixture
def open_store(tmp_path, target):
    """Open a store on this run's engine (`home` picks the SQLite file and index dir)."""
    opened: list[Store] = []

    async def _open(home: str = "home", **kw) -> Store:
        t = StoreTarget(**{**target.__dict__, **kw}) if kw else target
        s = await store_index.open_store(tmp_path / home / "memoryd.db", target=t)
        opened.append(s)
        return s

    yield _open


@pytest.fixture
async def store(open_store):
    s = await open_store()
    yield s
    await s.close()
