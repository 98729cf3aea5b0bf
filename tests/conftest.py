"""Shared fixtures. Nothing here touches the real home: MEMORYD_HOME and the XDG
variables point into a tmp dir for every test."""

from __future__ import annotations

import os

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from pathlib import Path  # noqa: E402

import pytest  # noqa: E402

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "sessions"


@pytest.fixture(autouse=True)
def memoryd_home(tmp_path_factory, monkeypatch):
    home = tmp_path_factory.mktemp("home")
    monkeypatch.setenv("MEMORYD_HOME", str(home))
    monkeypatch.delenv("MEMORYD_SOCKET", raising=False)
    monkeypatch.delenv("MEMORYD_CONFIG", raising=False)
    # daemons started from the environment rank lexically unless a test turns embeddings
    # on (tests/embed): no test pays for a model it does not test
    monkeypatch.setenv("MEMORYD_EMBED__ENABLED", "false")
    for var in ("XDG_CONFIG_HOME", "XDG_DATA_HOME", "XDG_STATE_HOME", "XDG_CACHE_HOME"):
        monkeypatch.setenv(var, str(home / var.lower()))
    monkeypatch.setenv("HOME", str(home / "userhome"))
    (home / "userhome").mkdir()
    return home


@pytest.fixture
def fixtures_dir() -> Path:
    """The real agents' transcripts kept in the repository (provenance in its README)."""
    return FIXTURES


@pytest.fixture
def sock():
    """A Unix socket path short enough for sun_path (under /tmp, removed afterwards)."""
    from tests.helpers import short_dir

    with short_dir() as d:
        yield d / "m.sock"


@pytest.fixture
def src(tmp_path):
    """An empty directory to watch."""
    d = tmp_path / "src"
    d.mkdir()
    return d


@pytest.fixture(scope="session", autouse=True)
def litellm_imported():
    """Import litellm once, before the first test, as the daemon does on first use: it
    takes seconds of CPU (20 s on a loaded machine), which would otherwise land inside
    whichever test first talks to the fake LLM server and eat its time bound."""
    from memoryd.llm import _import_litellm

    _import_litellm()


def _started_pg_server():
    """A real PostgreSQL server (tests/pg_server.py), yielded then destroyed. Skipped with a
    reason only when no server binary exists and CI is unset; in CI it must run."""
    from tests.pg_server import PgServer, find_bindir

    bindir = find_bindir()
    if bindir is None or not (bindir / "initdb").exists():
        if os.environ.get("CI"):
            pytest.fail("CI: PostgreSQL's initdb was not found (apt-get install postgresql)")
        pytest.skip("no PostgreSQL server binary (initdb); apt-get install postgresql")
    server = PgServer(bindir)
    server.init()
    server.start()
    yield server
    server.destroy()


@pytest.fixture(scope="session")
def pg_server():
    """One real PostgreSQL server for the test session."""
    yield from _started_pg_server()


@pytest.fixture
def own_pg_server():
    """A server of this test's own, to stop and start (outages)."""
    yield from _started_pg_server()


@pytest.fixture
def pg_url(pg_server):
    """A fresh, empty database on the session's server; its URL carries the password."""
    name = pg_server.create_database()
    yield pg_server.url(name)
    pg_server.drop_database(name)
