"""Issue 30: the overview's charts carry the same numbers as the store and the served
log, drawn as SVG without a script, with a table of the numbers beside each; the raw
status stays one click away."""

from __future__ import annotations

import datetime as dt
import json
import re
import sqlite3
import time

from memoryd.web.charts import Series, number, stacked, table
from tests.helpers import wait_for, write_jsonl
from tests.web.test_access import jar, logged_in


def test_a_stacked_chart_escapes_and_carries_its_numbers():
    days = ["2026-11-27", "2026-11-28"]
    svg = str(stacked(days, [Series("<script>x</script>", [3, 0]), Series("codex", [1, 2])],
                      label="t", unit="messages", limit=5, limit_label="budget"))
    assert "<script>" not in svg and "&lt;script&gt;" in svg
    assert 'data-day="2026-11-27" data-total="4"' in svg
    assert 'data-day="2026-11-28" data-total="2"' in svg
    assert "2026-11-28 · codex: 2 messages" in svg and "budget: 5 messages" in svg
    assert "<td>3</td><td>1</td>" in str(table(days, [Series("a", [3, 0]),
                                                      Series("b", [1, 2])], caption="c"))
    assert number(12345) == "12k" and number(1234) == "1.2k" and number(2_500_000) == "2.5M"


def claude_turns(session: str, texts: list[str], when: dt.datetime) -> list[dict]:
    out, parent = [], None
    for i, text in enumerate(texts):
        role = "user" if i % 2 == 0 else "assistant"
        uid = f"{session}-{i}"
        out.append({"type": role, "uuid": uid, "parentUuid": parent, "sessionId": session,
                    "cwd": "/home/u/shop", "version": "1.0.119", "userType": "external",
                    "isSidechain": False,
                    "timestamp": (when + dt.timedelta(seconds=i)).strftime(
                        "%Y-%m-%dT%H:%M:%S.000Z"),
                    "message": {"role": role, "content": text}})
        parent = uid
    return out


async def test_the_overview_charts_match_the_store_and_the_served_log(site):
    d, base, client = site
    now = dt.datetime.now(dt.UTC) - dt.timedelta(minutes=5)
    src = d.settings.watch.sources[0].path
    write_jsonl(src / "today" / "s-today.jsonl", claude_turns(
        "s-today", ["fix the cart badge", "Fixed it.", "thanks, now the footer", "Done."], now))
    write_jsonl(src / "today" / "s-yest.jsonl", claude_turns(
        "s-yest", ["migrate the db", "Migrated."], now - dt.timedelta(days=1)))

    db = d.paths.db

    def recent() -> dict[str, int]:
        since = time.time() - 30 * 86400
        with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as c:
            return {r[0]: r[1] for r in c.execute(
                "SELECT date(ts, 'unixepoch', 'localtime') AS day, count(*) FROM units "
                "WHERE ts >= ? GROUP BY day", (since,))}

    await wait_for(lambda: sum(recent().values()) >= 6, timeout=30)
    for q in ("cart badge", "database migration", "footer"):
        await client.request("POST", "/v1/context", {"query": q, "budget_tokens": 500,
                                                      "agent": "claude-code"})
    today = dt.date.today().isoformat()
    run = (await client.run_job("consolidate", {"date": today}))["result"]["memory"]
    log = await client.request("GET", "/v1/context/log", query={"days": 30})
    served = {r["day"]: r for r in log["daily"]}
    async with jar() as http:
        await logged_in(http, client)
        async with http.get(base + "/") as r:
            html = await r.text()
    charts = {m.group(1): m.group(2) for m in re.finditer(
        r'<figure class="chart-box" id="chart-(\w+)">(.*?)</figure>', html, re.S)}
    assert set(charts) == {"messages", "served", "llm", "memory"}
    totals = {m.group(1): float(m.group(2)) for m in re.finditer(
        r'data-day="([\d-]+)" data-total="([\d.]+)"', charts["messages"])}
    assert {k: v for k, v in totals.items() if v} == {k: float(v) for k, v in recent().items()}
    got = {m.group(1): float(m.group(2)) for m in re.finditer(
        r'data-day="([\d-]+)" data-total="([\d.]+)"', charts["served"])}
    assert {k: v for k, v in got.items() if v} == {
        k: float(v["requests"]) for k, v in served.items()}
    assert "claude-code" in charts["served"] and "<svg" in charts["llm"]
    # memory: what the day's consolidation did, as the job reported it
    changed = sum(len(run[k]) for k in ("added", "confirmed", "superseded", "demoted",
                                        "dropped"))
    mem = {m.group(1): float(m.group(2)) for m in re.finditer(
        r'data-day="([\d-]+)" data-total="([\d.]+)"', charts["memory"])}
    assert mem[today] == changed and changed > 0, (mem, run)
    # the raw status, one click away, is the status API's JSON
    raw = re.search(r'<summary>Raw status \(JSON\)</summary><pre>(.*?)</pre>', html, re.S)
    status = json.loads(raw.group(1).replace("&#34;", '"').replace("&quot;", '"')
                        .replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&")
                        .replace("&#39;", "'"))
    assert status["units"] == (await client.status())["units"]
