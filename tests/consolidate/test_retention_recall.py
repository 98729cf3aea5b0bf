"""Retention never hides history (issue 27, item 5): what it archived is found by plain
search (API, memoryctl, the web page's search) and recalled by /v1/context, marked as
archived; a restore brings it back into the index without doubles. A real daemon, real
JSONL, real SQLite and archive files, the API over the Unix socket, a settable clock."""

from __future__ import annotations

import datetime as dt

from memoryd.consolidate.clock import SettableClock
from tests.consolidate.test_history import caught_up_with, daemon
from tests.helpers import ctl, write_jsonl

OLD = [("user", "The theme selector crashes when the palette list is empty."),
       ("assistant", "Fixed: the selector now falls back to the default palette."),
       ("user", "数据库迁移在启动时失败了，报错说 flyway 找不到脚本。"),
       ("assistant", "脚本路径配置错了，已改为 classpath:db/migration。")]
NEW = [("user", "Let's bump the API client to v3 today."),
       ("assistant", "Bumped; the tests pass.")]


def rows(sid: str, day: str, turns: list[tuple[str, str]]) -> list[dict]:
    t0 = dt.datetime.fromisoformat(f"{day}T02:00:00+00:00")
    return [{"role": role, "content": text, "id": f"{sid}-{i:03d}",
             "timestamp": (t0 + dt.timedelta(minutes=i)).strftime("%Y-%m-%dT%H:%M:%SZ")}
            for i, (role, text) in enumerate(turns)]


async def test_archived_history_is_found_by_plain_search_and_context(tmp_path, src, sock,
                                                                      capsys):
    write_jsonl(src / "web" / "old.jsonl", rows("old", "2026-03-02", OLD))
    write_jsonl(src / "api" / "new.jsonl", rows("new", "2026-10-01", NEW))
    clock = SettableClock(dt.datetime(2026, 10, 2, 12, tzinfo=dt.UTC).timestamp())
    home = tmp_path / "home"
    archive = home / "data" / "archive"
    async with daemon(tmp_path, src, sock, clock, summary={"enabled": False}) as (d, c):
        await caught_up_with(c, len(OLD) + len(NEW))
        # the first steps' preview: what the first run would move, nothing moved
        code, out, _ = await ctl(capsys, sock, "run", "retention", "--dry-run")
        assert code == 0 and "retention (dry run: nothing written)" in out
        assert "1 sessions (4 units) archived" in out and "web/old -> 2026-03 (4 units)" in out
        assert not archive.exists() or not list(archive.iterdir())
        code, out, _ = await ctl(capsys, sock, "run", "retention")
        assert code == 0 and "1 sessions (4 units) archived" in out
        assert (await c.status())["units"] == len(NEW)  # the hot store let them go

        r = await c.search(query="theme selector crash")
        assert r["total"] == 1 and r["shown"] == 1 and "in the archive" in r["message"]
        hit = r["results"][0]
        assert hit["session_id"] == "web/old" and hit["archived"] == "2026-03"
        assert hit["unit_id"] is None and "theme selector crashes" in hit["snippet"]
        assert (await c.search(query="数据库迁移"))["results"][0]["archived"] == "2026-03"
        # filters hold for archived units too
        assert (await c.search(query="theme selector", agent="codex"))["total"] == 0
        assert (await c.search(query="theme selector", project="nowhere"))["total"] == 0
        assert (await c.search(query="theme selector", mode="and",
                               session_id="web/old"))["total"] == 1
        assert (await c.search(query="theme kangaroo", mode="and"))["total"] == 0
        code, out, _ = await ctl(capsys, sock, "search", "theme selector crash")
        assert code == 0 and "0 matches" not in out and "archived 2026-03" in out

        ctx = await c.request("POST", "/v1/context", {
            "query": "why did the theme selector crash last spring", "budget_tokens": 1500})
        got = [x for x in ctx["recalled"] if x.get("archived")]
        assert got and got[0]["session_id"] == "web/old"
        assert "palette list is empty" in ctx["rendered"] and "archived" in ctx["rendered"]

        # a restore brings them back into the index: found once, not archived
        await c.request("POST", "/v1/archive/restore", {"session_id": "web/old"})
        r = await c.search(query="theme selector crash")
        assert r["results"] and all(x["archived"] is None for x in r["results"])
        assert [x["session_id"] for x in r["results"]].count("web/old") == len(
            {x["record_id"] for x in r["results"] if x["session_id"] == "web/old"})
