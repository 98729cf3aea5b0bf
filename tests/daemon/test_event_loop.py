"""The daemon's event loop: uvloop where it is installed (its own work per request is most
of the loop thread's CPU), the standard library's when asked. The
subprocess tests (test_e2e.py, cli/test_papercuts.py, reliability/) run the daemon on it."""

import asyncio

import uvloop

from memoryd.cli.memoryd import loop_factory


def test_the_daemon_runs_on_uvloop_unless_told_otherwise(monkeypatch):
    monkeypatch.delenv("MEMORYD_LOOP", raising=False)
    assert loop_factory() is uvloop.new_event_loop
    with asyncio.Runner(loop_factory=loop_factory()) as runner:
        assert isinstance(runner.get_loop(), uvloop.Loop)
    monkeypatch.setenv("MEMORYD_LOOP", "asyncio")
    assert loop_factory() is None
