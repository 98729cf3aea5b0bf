"""A session id that repeats across a fleet's machines (issue 28 item 1): two daemons in
one namespace, each watching a `chat.jsonl` (as nanobot's `cli_direct.jsonl` is on every
machine), against the real PostgreSQL server. The list shows each session's machine;
`?machine=` and `--machine` pick one for show, export, summarize and forget; a bare id
says which machines have it; and a forget reaches every machine's index."""

from __future__ import annotations

import pytest

from memoryd.client import ApiError
from tests.fleet.daemons import fleet_daemons, msg
from tests.helpers import ctl, short_dir, wait_for, write_jsonl

WORDS = {"laptop": "egret", "server": "kestrel"}


async def _found(c, word: str) -> int:
    return (await c.search(query=word))["total"]


async def test_issue_28_a_session_id_on_two_machines_is_addressable(tmp_path, pg_url,
                                                                    capsys):
    roots = {}
    for m, word in WORDS.items():
        roots[m] = tmp_path / m / "src"
        write_jsonl(roots[m] / "chat.jsonl",
                    [msg(i, f"{m} line {i} about the {word}") for i in range(4)])
    with short_dir() as d:
        async with fleet_daemons(tmp_path, roots, d, pg_url) as fleet:
            (_, lc), (_, sc) = fleet["laptop"], fleet["server"]
            sock = d / "server.sock"

            async def both_listed():
                rows = (await sc.sessions())["sessions"]
                return rows if len(rows) == 2 else None

            rows = await wait_for(both_listed, 60)
            assert {(r["session_id"], r["machine"]) for r in rows} == {
                ("chat", "laptop"), ("chat", "server")}

            # a bare id names both: the error says which machines, and how to pick
            with pytest.raises(ApiError) as e:
                await sc.session("chat")
            assert e.value.status == 409 and e.value.field == "machine"
            assert "laptop, server" in e.value.message
            shown = await sc.session("chat", machine="laptop")
            assert shown["machine"] == "laptop" and shown["units"] == 4
            code, out, _ = await ctl(capsys, sock, "sessions", "show", "chat",
                                     "--machine", "server")
            assert code == 0 and "kestrel" in out and "egret" not in out
            code, out, err = await ctl(capsys, sock, "sessions", "forget", "chat", "--yes")
            assert code == 1 and "--machine" in err

            code, out, _ = await ctl(capsys, sock, "export", "--session", "chat",
                                     "--machine", "laptop", "--format", "jsonl")
            assert code == 0 and "egret" in out and "kestrel" not in out
            code, out, _ = await ctl(capsys, sock, "sessions", "summarize", "chat",
                                     "--machine", "laptop")
            assert code == 0 and out.startswith("generic chat:")
            summary = await sc.request("GET", "/v1/sessions/chat/summary",
                                       query={"machine": "laptop"})
            assert summary["machine"] == "laptop"

            # both indexes hold both sessions' words
            for c in (lc, sc):
                for word in WORDS.values():
                    await wait_for(lambda c=c, w=word: _found(c, w), 60)

            # forgetting the laptop's chat on the server's daemon: gone from every
            # machine's index, the server's chat untouched
            code, out, _ = await ctl(capsys, sock, "sessions", "forget", "chat",
                                     "--machine", "laptop", "--yes")
            assert code == 0 and "of laptop" in out and "(4 units)" in out
            for c in (lc, sc):
                await wait_for(lambda c=c: _gone(c, "egret"), 60)
                assert await _found(c, "kestrel") > 0
            rows = (await lc.sessions())["sessions"]
            assert [(r["session_id"], r["machine"]) for r in rows] == [("chat", "server")]
            # one left: the bare id names it again
            assert (await lc.session("chat"))["machine"] == "server"


async def _gone(c, word: str) -> bool:
    return await _found(c, word) == 0


def test_issue_28_archived_sessions_of_one_id_on_two_machines_stay_two(tmp_path):
    """The archive (retention's monthly files) keeps two machines' `chat` apart: both
    machines' records of the same ids are kept, and a forget or restore of one machine's
    takes only its records (and any archived before records named their machine)."""
    from memoryd.memory import archive

    def rec(machine: str | None, i: int) -> dict:
        r = {"agent": "generic", "session_id": "chat", "record_id": f"m{i}",
             "content": f"{machine} {i}"}
        return r if machine is None else {**r, "machine": machine}

    d = tmp_path / "archive"
    assert archive.add(d, "2026-05", [rec("laptop", i) for i in range(3)]) == 3
    assert archive.add(d, "2026-05", [rec("server", i) for i in range(3)]) == 3
    archive.add(d, "2026-04", [rec(None, 9)])  # from before records named their machine
    got = archive.take(d, "generic", "chat", remove=False, machine="server")
    assert sorted(r["content"] for r in got) == ["None 9", "server 0", "server 1", "server 2"]
    assert len(archive.take(d, "generic", "chat", remove=True, machine="laptop")) == 4
    left = archive.take(d, "generic", "chat", remove=False)
    assert sorted(r["content"] for r in left) == ["server 0", "server 1", "server 2"]
