"""Every page in Chromium at 1280 and 390 px: each renders with its heading, fits the
width, and leaves a full-page screenshot in .screenshots/<page>-<width>.png (gitignored;
the README shows the copies in docs/screenshots/)."""

from __future__ import annotations

import pytest

from tests.web.conftest import CJK_CWD, CJK_SESSION
from tests.web.test_browser import SHOTS, browser, log_in, page, site  # noqa: F401

pytestmark = [pytest.mark.browser, pytest.mark.timeout(240),
              pytest.mark.asyncio(loop_scope="module")]

PAGES = [("overview", "/", "Overview"),
         ("search", "/search?q=数据库迁移", "Search"),
         ("sessions", "/sessions", "Sessions"),
         ("session", f"/sessions/{CJK_SESSION}?agent=claude-code", None),
         ("timeline", "/timeline", "Timeline"),
         ("memory", "/memory", "Memory"),
         ("context", f"/context?prompt=数据库迁移&cwd={CJK_CWD}", "Context preview"),
         ("served", "/served", "Context served")]


async def test_every_page_at_desktop_and_phone_width(site, page):
    from playwright.async_api import expect

    d, base, client = site
    await client.request("POST", "/v1/context", {"query": "数据库迁移", "budget_tokens": 300,
                                                  "agent": "claude-code", "cwd": CJK_CWD})
    await log_in(page, client, base)
    for width, height in ((1280, 900), (390, 844)):
        await page.set_viewport_size({"width": width, "height": height})
        for name, path, heading in PAGES:
            resp = await page.goto(base + path)
            assert resp.status == 200, path
            h1 = (page.get_by_role("heading", name=heading, exact=True) if heading
                  else page.locator("h1"))
            await expect(h1).to_be_visible()
            scroll = await page.evaluate("document.documentElement.scrollWidth")
            assert scroll <= width, f"{path} is {scroll}px wide at {width}px"
            await page.screenshot(path=str(SHOTS / f"{name}-{width}.png"), full_page=True)
