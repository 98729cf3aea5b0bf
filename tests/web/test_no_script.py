"""Issue 30: every page reads and navigates with JavaScript off (the live parts and
htmx are extras), and none scrolls sideways at phone width. Chromium, with script
execution disabled through the DevTools protocol."""

from __future__ import annotations

import datetime as dt

import pytest

from tests.helpers import write_jsonl
from tests.web.test_browser import browser, log_in, page, site  # noqa: F401  (fixtures)
from tests.web.test_dashboard import claude_turns

pytestmark = [pytest.mark.browser, pytest.mark.timeout(240),
              pytest.mark.asyncio(loop_scope="module")]

PAGES = {"/": "Overview", "/search?q=数据库迁移": "Search", "/sessions": "Sessions",
         "/timeline": "Timeline",
         "/memory": "Memory", "/context": "Context preview", "/served": "Context served"}
LONG = "/home/u/" + "very-long-directory-name-without-a-break-" * 4 + "project"


async def test_every_page_reads_without_javascript_and_fits_a_phone(site, page):
    from playwright.async_api import expect

    d, base, client = site
    src = d.settings.watch.sources[0].path
    turns = claude_turns("long-path", [f"look at {LONG}/src/main.py please", "Done."],
                         dt.datetime.now(dt.UTC))
    for t in turns:
        t["cwd"] = LONG
    write_jsonl(src / "long" / "long-path.jsonl", turns)
    await client.request("POST", "/v1/context", {"query": "数据库迁移", "budget_tokens": 300,
                                                  "agent": "claude-code", "cwd": LONG})
    await log_in(page, client, base)
    cdp = await page.context.new_cdp_session(page)
    await cdp.send("Emulation.setScriptExecutionDisabled", {"value": True})
    await page.set_viewport_size({"width": 390, "height": 844})
    for path, heading in PAGES.items():
        await page.goto(base + path)
        await expect(page.get_by_role("heading", name=heading, exact=True)).to_be_visible()
        assert await page.evaluate("typeof htmx") == "undefined"  # no script ran
        width = await page.evaluate("document.documentElement.scrollWidth")
        assert width <= 390, f"{path} scrolls sideways at phone width ({width}px)"
    # navigation is plain links: from the overview to the memory page and on
    await page.goto(base + "/")
    await page.get_by_role("link", name="Memory", exact=True).click()
    await expect(page.get_by_role("heading", name="Memory", exact=True)).to_be_visible()
    await page.goto(base + "/")
    await page.get_by_role("link", name="What each agent was given").click()
    await expect(page.get_by_role("heading", name="Context served")).to_be_visible()
