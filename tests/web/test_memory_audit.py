"""Issue 30 item 3: a memory you can audit. Each MEMORY.md entry shows its subject, its
dates, the sessions and turns behind it (links that open them) and what it replaced; a
timeline of memory's changes by day; a line written by hand says so."""

from __future__ import annotations

import datetime as dt
import re
from html import unescape

from memoryd.client import ApiError
from tests.helpers import wait_for, write_jsonl
from tests.web.test_access import jar, logged_in
from tests.web.test_dashboard import claude_turns


async def test_an_entry_shows_where_it_came_from_and_what_it_replaced(site):
    d, base, client = site
    src = d.settings.watch.sources[0].path
    yesterday = dt.datetime.now(dt.UTC) - dt.timedelta(days=1)
    today = dt.datetime.now(dt.UTC) - dt.timedelta(minutes=5)
    write_jsonl(src / "audit" / "a1.jsonl", claude_turns(
        "a1", ["Don't use npm here, use pnpm.", "OK, pnpm from now on."], yesterday))
    write_jsonl(src / "audit" / "a2.jsonl", claude_turns(
        "a2", ["Actually, from now on we use bun instead of pnpm in this repo.",
               "OK, I'll use bun from now on."], today))

    async def read() -> bool:
        # the store's readers hold both sessions (what consolidation reads), not only
        # the index: a search found them before a day's read did, once in 15 runs here
        try:
            got = [await client.request("GET", f"/v1/sessions/{sid}") for sid in ("a1", "a2")]
        except ApiError:
            return False
        return all(g["units"] == 2 for g in got) and (await client.status())["caught_up"]

    await wait_for(read, timeout=30)
    for when in (yesterday, today):
        day = when.astimezone().date().isoformat()
        run = (await client.run_job("consolidate", {"date": day}))["result"]
        assert run["sessions"] >= 1, run
    await client.request("POST", "/v1/memory/entries", {"content": "My laptop is a ThinkPad X1."})
    async with jar() as http:
        await logged_in(http, client)
        async with http.get(base + "/memory") as r:
            assert r.status == 200
            html = await r.text()
    blocks = re.split(r'(?=<li id="line-\d+" class="entry">)',
                      html[html.index('id="h-entries"'):html.index('id="h-changes"')])
    found = [b for b in blocks if "bun instead of pnpm" in b]
    assert found, unescape(html[html.index('id="h-entries"'):])
    entry = found[0]
    text = unescape(entry)
    assert "package manager" in text  # its subject
    assert re.search(r"since \d{4}-\d{2}-\d{2}, confirmed \d{4}-\d{2}-\d{2}", text)
    assert "<s>" in entry and "pnpm" in text  # what it replaced
    links = re.findall(r'<a href="(/sessions/[^"]+)">', entry)
    said = [link for link in links if "/sessions/a2?" in link and "unit=" in link]
    assert said, links
    async with jar() as http:
        await logged_in(http, client)
        async with http.get(base + unescape(said[0])) as r:
            assert r.status == 200
            assert "from now on we use bun" in unescape(await r.text())
    hand = re.search(r"ThinkPad X1.*?</li>", html, re.S)
    assert hand and "written by hand" in hand.group(0)
    # the daily note and HISTORY.md read as formatted text, under the page's headings
    note = html[html.index('id="h-daily"'):html.index('id="h-history"')]
    assert "<h4>Topics</h4>" in note and "<li>" in note and "## Topics" not in note
    hist = html[html.index('id="h-history"'):]
    assert "<h3>HISTORY</h3>" in hist and "<li>" in hist
    changes = html[html.index('id="h-changes"'):html.index('id="h-daily"')]
    assert "replaced" in changes and "bun" in unescape(changes)
    assert changes.index(today.astimezone().date().isoformat()) < changes.index(
        yesterday.astimezone().date().isoformat())  # newest day first


async def test_the_served_log_has_its_page_linked_from_the_overview(site):
    """Issue 30 item 6: what each agent was given, when, for which prompt."""
    d, base, client = site
    await client.request("POST", "/v1/context", {"query": "数据库迁移 <b>bold</b>",
                                                  "budget_tokens": 400, "agent": "claude-code"})

    async def logged() -> bool:  # the served log is written after the answer, in the background
        return bool((await client.request("GET", "/v1/context/log"))["entries"])

    await wait_for(logged)
    async with jar() as http:
        await logged_in(http, client)
        async with http.get(base + "/") as r:
            assert 'href="/served"' in await r.text()
        async with http.get(base + "/served") as r:
            assert r.status == 200
            html = await r.text()
        async with http.get(base + "/served?last=²") as r:
            assert r.status == 400
    assert "数据库迁移 &lt;b&gt;bold&lt;/b&gt;" in html and "claude-code" in html
    assert re.search(r'<a href="/sessions/[^"]+unit=\d+">turn \d+</a>', html)
