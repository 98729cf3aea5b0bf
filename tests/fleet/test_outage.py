"""The database goes away; nothing is lost (issue 14 item 5). Two real daemons in fleet
mode append live into one namespace of a PostgreSQL server of the test's own, which is
stopped for several seconds and started again: the daemons stay up, say so in status and
doctor, answer search from the local index (stale), and catch up by themselves: every
line stored exactly once, one log line down and one up per daemon, no traceback, no
password anywhere."""

from __future__ import annotations

import asyncio
import json
import logging

import psycopg
import pytest

from memoryd.daemon import Daemon
from tests.fleet.daemons import fleet_daemons, msg
from tests.helpers import AsyncClient, caught_up, ctl, short_dir, wait_for, write_jsonl


async def _append(root, machine: str, n0: int, stop: asyncio.Event, written: list[str]):
    """One line every 50 ms to this machine's transcript, until `stop`."""
    i = n0
    while not stop.is_set():
        text = f"{machine} live line {i} 中文"
        await asyncio.to_thread(write_jsonl, root / "live.jsonl", [msg(i, text)])
        written.append(text)
        i += 1
        await asyncio.sleep(0.05)


@pytest.mark.slow
async def test_outage_two_daemons_stay_up_answer_stale_and_catch_up_exactly_once(
        tmp_path, own_pg_server, memoryd_home, caplog, capsys):
    caplog.set_level(logging.DEBUG)
    url = own_pg_server.url()
    machines = ("laptop", "server")
    roots = {m: tmp_path / m / "src" for m in machines}
    written: dict[str, list[str]] = {m: [] for m in machines}
    for m in machines:
        first = [f"{m} quokka plan {i}" for i in range(3)]
        write_jsonl(roots[m] / "live.jsonl", [msg(i, t) for i, t in enumerate(first)])
        written[m] += first
    with short_dir() as d:
        async with fleet_daemons(tmp_path, roots, d, url) as fleet:
            daemons = {m: dm for m, (dm, _) in fleet.items()}
            clients = {m: c for m, (_, c) in fleet.items()}
            laptop = clients["laptop"]
            before = await wait_for(lambda: _found(laptop, "quokka", 6))
            assert before["stale"] is False and before["store"] == "ok"

            stop = asyncio.Event()
            appenders = [asyncio.create_task(_append(roots[m], m, 3, stop, written[m]))
                         for m in machines]
            await asyncio.sleep(1.0)
            await asyncio.to_thread(own_pg_server.stop, "fast")
            down = await wait_for(lambda: _unreachable(laptop), timeout=30)
            await wait_for(lambda: _unreachable(clients["server"]), timeout=30)
            # while down: status says so, search answers from the local index (stale)
            assert down["caught_up"] is False and down["store"]["unreachable_since"]
            assert down["state"] == "running" and down["units"] >= 3  # the last counts read
            r = await laptop.search(query="quokka")
            assert r["stale"] is True and r["store"] == "unreachable"
            assert r["total"] >= 6 and r["shown"] == 6 and "unreachable" in r["message"]
            # context too: recalled from the local index, MEMORY.md fitted beside it
            ctx = await laptop.request("POST", "/v1/context", {"query": "quokka",
                                                               "budget_tokens": 600})
            assert ctx["stale"] is True and ctx["store"] == "unreachable"
            assert ctx["recalled"] and "quokka" in ctx["rendered"]
            code, out, _ = await ctl(capsys, d / "laptop.sock", "status")
            assert code == 0 and "store: unreachable since" in out and "caught_up: false" in out
            _, doctor, _ = await ctl(capsys, d / "laptop.sock", "doctor")
            assert "store: unreachable since" in doctor
            metrics = await _metrics(daemons["laptop"])
            assert "memoryd_store_up 0.0" in metrics
            shown = json.dumps(down) + out + doctor + json.dumps(r) + metrics
            await asyncio.sleep(4.0)  # appends go on with the database away
            assert all(dm.state == "running" for dm in daemons.values())

            await asyncio.to_thread(own_pg_server.start)
            await asyncio.sleep(1.0)
            stop.set()
            await asyncio.gather(*appenders)
            for m, c in clients.items():
                st = await wait_for(lambda c=c: caught_up(c), timeout=60)
                assert st["store"]["reachable"] is True
            r = await laptop.search(query="quokka")
            assert r["stale"] is False and r["total"] == 6
            code, out, _ = await ctl(capsys, d / "laptop.sock", "status")
            assert "unreachable" not in out
            shown += out

    # every line of both machines stored exactly once
    with psycopg.connect(url) as conn:
        rows = conn.execute(
            "SELECT s.machine, u.content FROM memoryd_team.units u "
            "JOIN memoryd_team.sessions s ON s.id = u.session_pk").fetchall()
    for m in machines:
        stored = [c for mm, c in rows if mm == m]
        assert len(stored) == len(set(stored)), f"{m}: a line stored twice"
        assert sorted(stored) == sorted(written[m]), f"{m}: lost or extra lines"
    assert len(written["laptop"]) > 60  # appends ran through the outage

    records = [r for r in caplog.records if r.name.startswith("memoryd")]
    lines = [r.getMessage() for r in records if r.levelno >= logging.INFO]
    downs = [m for m in lines if "store unreachable:" in m]
    ups = [m for m in lines if "store reachable again" in m]
    assert len(downs) == 2 and len(ups) == 2, lines  # one each, per daemon
    assert not any(r.exc_info for r in records), [r.getMessage() for r in records
                                                  if r.exc_info]
    assert not [r for r in records if r.levelno >= logging.ERROR]
    assert "Traceback" not in caplog.text
    assert own_pg_server.password not in caplog.text + shown


async def _found(c: AsyncClient, query: str, n: int):
    r = await c.search(query=query)
    return r if r["total"] >= n else None


async def _unreachable(c: AsyncClient):
    st = await c.status()
    return st if st["store"].get("reachable") is False else None


async def _metrics(dm: Daemon) -> str:
    import aiohttp

    conn = aiohttp.UnixConnector(path=str(dm.socket_path))
    async with aiohttp.ClientSession(connector=conn) as s, s.get(
            "http://localhost/metrics") as resp:
        assert resp.status == 200
        return await resp.text()
