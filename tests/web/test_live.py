"""Issue 30 item 2: the page is live. In Chromium, a line appended to a watched file
changes the open overview's figures and marks an open search as behind, without a
reload; `/live` needs the page's cookie and gives only the fields the page uses."""

from __future__ import annotations

import datetime as dt

import pytest

from tests.helpers import write_jsonl
from tests.web.test_access import jar, logged_in
from tests.web.test_browser import browser, log_in, page, site  # noqa: F401  (fixtures)
from tests.web.test_dashboard import claude_turns

pytestmark = [pytest.mark.browser, pytest.mark.timeout(240),
              pytest.mark.asyncio(loop_scope="module")]


async def test_the_overview_and_search_follow_new_messages_without_a_reload(site, page):
    from playwright.async_api import expect

    d, base, client = site
    await log_in(page, client, base)
    stored = page.locator("#live-cards .card", has_text="sessions")
    before = (await client.status())["units"]
    await expect(stored).to_contain_text(f"{before} units")
    await page.evaluate("window.__same_page = true")  # gone if the page reloads

    src = d.settings.watch.sources[0].path
    now = dt.datetime.now(dt.UTC)
    write_jsonl(src / "live" / "l1.jsonl", claude_turns(
        "l1", ["the quokka exporter is flaky", "Looking at it."], now))
    await expect(stored).to_contain_text(f"{before + 2} units")
    assert await page.evaluate("window.__same_page === true")

    await page.goto(base + "/search?q=quokka")
    await expect(page.locator("li.hit")).to_have_count(1)
    mark = page.locator("#live-mark")
    await expect(mark).to_be_hidden()
    write_jsonl(src / "live" / "l2.jsonl", claude_turns(
        "l2", ["a second quokka appears", "Noted."], now))
    await expect(mark).to_be_visible()
    await mark.get_by_role("link", name="search again").click()
    await expect(page.locator("li.hit")).to_have_count(2)


async def test_live_needs_the_cookie_and_sends_only_what_the_page_uses(site):
    d, base, client = site
    async with jar() as http:
        async with http.get(base + "/live") as r:
            assert r.status == 403
        await logged_in(http, client)
        async with http.get(base + "/live") as r:
            assert r.status == 200 and r.content_type == "text/event-stream"
            assert await r.content.readline() == b": connected\n"
            d.events.publish("ingested", path="/p.jsonl", agent="codex", units=3,
                             secret_field="x")
            d.events.publish("job_started", job="reindex")  # not followed by the page
            d.events.publish("memory_changed", origin="web", total=4)
            lines = [await r.content.readline() for _ in range(7)]
    text = b"".join(lines).decode()
    assert '"event": "ingested"' in text and '"units": 3' in text
    assert "secret_field" not in text and "reindex" not in text
    assert '"event": "memory_changed"' in text and "origin" not in text
