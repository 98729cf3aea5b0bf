"""Reading sessions and the timeline in Chromium (issue 30): a 500-message session in
pages with a jump to any turn, markdown rendered and inert, tool calls laid out, the
timeline by day, no sideways scrolling at 390 px, and every page with JavaScript off."""

from __future__ import annotations

import re
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from tests.conftest import FIXTURES
from tests.helpers import wait_for, write_jsonl
from tests.web.conftest import live_site, login_url
from tests.web.test_browser import ARGS, SHOTS, chromium

pytestmark = [pytest.mark.browser, pytest.mark.timeout(300),
              pytest.mark.asyncio(loop_scope="module")]

LONG = "long-0001"
OTHER = "other-0001"
GROUPS = 100  # five messages each: 500 in all
LONG_CWD = "/home/u/" + "really_long_project_directory_name_without_any_break_" * 3 + "end"
LONG_PATH = LONG_CWD + "/src/" + "VeryLongIdentifierWithoutSpaces" * 6 + ".py"
RARE = "zebrafinch"
RARE_GROUP = 87
XSS = ("<script>window.__xss = 1</script> [click](javascript:window.__xss=2) "
       "<img src=x onerror=\"window.__xss=3\"> **still bold**")


def _ts(day: int, group: int, i: int) -> str:
    return f"2026-01-{day:02d}T{8 + group // 20:02d}:{group % 20 * 2:02d}:{i:02d}.000Z"


def long_session(path: Path) -> None:
    base = {"sessionId": LONG, "cwd": LONG_CWD, "version": "1.0.119", "userType": "external",
            "isSidechain": False}
    rows: list[dict[str, Any]] = []
    prev = None
    for g in range(GROUPS):
        text = f"Question {g} about `{LONG_PATH}`"
        if g == 0:
            text = XSS
        elif g == 1:
            text = "Please make this **bold** and run:\n\n```sh\nuv run pytest -q\n```\n"
        elif g == RARE_GROUP:
            text = f"Where did the {RARE} go? {LONG_PATH}"
        out = "\n".join(f"line {n} {'ResultIdentifierWithoutSpaces' * 5}" for n in range(60))
        msgs = [
            ("user", {"role": "user", "content": text}),
            ("assistant", {"role": "assistant", "content": [
                {"type": "text", "text": f"Answer **{g}**"},
                {"type": "tool_use", "id": f"toolu_{g}", "name": "Bash",
                 "input": {"command": f"cat {LONG_PATH}\nsed -n 1p notes.txt",
                           "file_path": LONG_PATH, "flags": {"n": g}}}]}),
            ("user", {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": f"toolu_{g}", "content": out}]}),
            ("assistant", {"role": "assistant", "content": [{"type": "text",
                                                             "text": f"Done {g}."}]}),
        ]
        for i, (kind, message) in enumerate(msgs):
            uid = f"l{g}-{i}"
            rows.append({**base, "type": kind, "uuid": uid, "parentUuid": prev,
                         "timestamp": _ts(8, g, i), "message": message})
            prev = uid
    write_jsonl(path, rows)


def other_session(path: Path) -> None:
    base = {"sessionId": OTHER, "cwd": "/home/u/other", "version": "1.0.119",
            "userType": "external", "isSidechain": False}
    write_jsonl(path, [
        {**base, "type": "user", "uuid": "o1", "parentUuid": None,
         "timestamp": "2026-01-07T12:00:00.000Z",
         "message": {"role": "user", "content": "Rename the release branch"}},
        {**base, "type": "assistant", "uuid": "o2", "parentUuid": "o1",
         "timestamp": "2026-01-07T12:05:00.000Z",
         "message": {"role": "assistant", "content": [{"type": "text", "text": "Renamed."}]}},
    ])


def local_day(iso: str) -> str:
    return datetime.fromisoformat(iso.replace("Z", "+00:00")).astimezone().date().isoformat()


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def site(tmp_path_factory):
    chromium()
    home = tmp_path_factory.mktemp("reading")
    async with live_site(home, FIXTURES) as (d, base, client):
        long_session(home / "claude" / "long" / f"{LONG}.jsonl")
        other_session(home / "claude" / "other" / f"{OTHER}.jsonl")

        async def ingested():
            rows = (await client.request("GET", "/v1/sessions?limit=50"))["sessions"]
            units = {r["session_id"]: r["units"] for r in rows}
            return units.get(LONG, 0) >= 5 * GROUPS and units.get(OTHER, 0) == 2

        await wait_for(ingested, timeout=120)
        yield d, base, client


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def chrome():
    exe = chromium()
    from playwright.async_api import async_playwright, expect

    expect.set_options(timeout=45_000)
    async with async_playwright() as p:
        b = await p.chromium.launch(executable_path=str(exe), headless=True, args=ARGS)
        try:
            yield b
        finally:
            await b.close()


async def logged_in_page(chrome, client, base: str, **ctx: Any):
    context = await chrome.new_context(viewport=ctx.pop("viewport", {"width": 1280,
                                                                     "height": 900}), **ctx)
    context.set_default_timeout(45_000)
    page = await context.new_page()
    await page.goto(await login_url(client))
    await page.wait_for_url(base + "/")  # the login page moves on by a meta refresh
    return context, page


async def shot(page, name: str) -> None:
    SHOTS.mkdir(exist_ok=True)
    await page.screenshot(path=str(SHOTS / f"{name}.png"), full_page=True)


def session_path() -> str:
    return f"/sessions/{LONG}?agent=claude-code"


async def test_issue_30_a_500_message_session_pages_and_jumps_to_a_turn(site, chrome):
    from playwright.async_api import expect

    d, base, client = site
    context, page = await logged_in_page(chrome, client, base)
    try:
        await page.goto(base + session_path())
        msgs = page.locator("ol.messages > li.msg")
        await expect(msgs).to_have_count(100)
        await expect(page.locator("#h-messages")).to_contain_text("page 1 of 5")
        await expect(msgs.first).to_contain_text("#1")
        # a later page from the pager
        await page.locator("nav.pager").first.get_by_role("link", name="4", exact=True).click()
        await expect(page.locator("#h-messages")).to_contain_text("page 4 of 5")
        await expect(msgs).to_have_count(100)
        await expect(msgs.first.locator(".meta")).to_contain_text("#301 ")
        # the jump to turn 45 (on page 3: 20 turns a page) lands on its anchor
        await page.get_by_label("Turn", exact=True).fill("45")
        await page.get_by_role("button", name="Go").click()
        await page.wait_for_url(re.compile(r"page=3#turn-45$"))
        await expect(page.locator("#h-messages")).to_contain_text("page 3 of 5")
        anchor = page.locator("#turn-45")
        await expect(anchor).to_be_in_viewport()
        await page.screenshot(path=str(SHOTS / "session-turn.png"))
        # the jump to the summary is on every page
        await expect(page.locator("nav.jump a[href='#summary']")).to_be_visible()
        # a search hit deep in the session opens the page holding it, marked
        await page.goto(base + "/search?q=" + RARE)
        await page.locator("a.hit-link").first.click()
        focus = page.locator("li.msg.focus")
        await expect(focus).to_contain_text(RARE)
        await expect(page.locator("#h-messages")).to_contain_text("page 5 of 5")
        assert "unit=" in page.url
    finally:
        await context.close()


async def test_issue_30_markdown_rendered_and_inert_tool_json_readable(site, chrome):
    from playwright.async_api import expect

    d, base, client = site
    context, page = await logged_in_page(chrome, client, base)
    try:
        await page.goto(base + session_path())
        msgs = page.locator("ol.messages > li.msg")
        # **bold** is <strong>, a fenced block is <pre><code>
        second_user = msgs.filter(has_text="Please make this").first
        await expect(second_user.locator(".content strong")).to_have_text("bold")
        await expect(second_user.locator(".content pre code")).to_have_text(
            "uv run pytest -q\n")
        # the attack turn: shown as text, nothing ran, no live tag or link came from it
        attack = msgs.first.locator(".content")
        await expect(attack).to_contain_text("<script>window.__xss = 1</script>")
        await expect(attack).to_contain_text("[click](javascript:window.__xss=2)")
        await expect(attack.locator("strong")).to_have_text("still bold")
        assert await attack.locator("script, img, a").count() == 0
        assert await page.evaluate("window.__xss === undefined")
        # a tool call: folded, its arguments laid out with real newlines
        call = msgs.filter(has=page.locator("details")).first
        details = call.locator("details")
        assert await details.get_attribute("open") is None
        await details.locator("summary").click()
        text = await details.locator("pre.tool").inner_text()
        assert f"command: |\n  cat {LONG_PATH}\n  sed -n 1p notes.txt" in text, text
        assert "\\n" not in text and "flags:\n  n: 0" in text
        await shot(page, "session-markdown")
        # a long tool result: clipped, the whole text one click away
        result = msgs.filter(has_text="line 0 ").first.locator("details")
        await result.locator("summary").click()
        await expect(result.locator("pre.tool")).not_to_contain_text("line 59 ")
        await expect(result.locator(".clipped")).to_contain_text(re.compile(r"\d+ more lines"))
        async with page.expect_navigation():
            await result.get_by_role("link", name="full text").click()
        body = await page.locator("body").inner_text()
        assert "line 59 " in body and "line 0 " in body
    finally:
        await context.close()


async def test_issue_30_timeline_by_day_links_open_sessions(site, chrome):
    from playwright.async_api import expect

    d, base, client = site
    context, page = await logged_in_page(chrome, client, base)
    try:
        await page.get_by_role("link", name="Timeline", exact=True).click()
        await expect(page.get_by_role("heading", name="Timeline", exact=True)).to_be_visible()
        days = page.locator("section.day h2")
        newest, other, cjk = (local_day(_ts(8, GROUPS - 1, 3)),
                              local_day("2026-01-07T12:00:00Z"), local_day("2026-01-05T10:00:00Z"))
        ids = [await h.get_attribute("id") for h in await days.all()]
        assert ids == [f"d-{newest}", f"d-{other}", f"d-{cjk}"], ids  # newest day first
        first_day = page.locator("section.day").first
        row = first_day.locator("li.tl-session")
        await expect(row).to_have_count(1)
        await expect(row).to_contain_text("500 messages")
        await expect(row).to_contain_text("claude-code")
        await shot(page, "timeline")
        # a project filter from a row, then back to everything and on to older days
        await page.locator("section.day").nth(1).get_by_role("link", name="/home/u/other").click()
        await expect(page.locator("section.day")).to_have_count(1)
        await expect(page.locator("li.tl-session")).to_contain_text("Rename the release")
        await page.goto(base + "/timeline?agent=nobody")
        await expect(page.locator("main")).to_contain_text("Nothing happened")
        await page.goto(base + "/timeline")
        await page.get_by_role("link", name="Older →").first.click()
        await expect(page.locator("section.day h2").first).to_contain_text("2025-10-0")
        # a session's link opens it
        await page.goto(base + "/timeline")
        await page.locator("section.day").nth(1).locator("a.tl-title").click()
        await expect(page.locator("h1")).to_contain_text("Rename the release")
        await expect(page.locator("ol.messages > li.msg")).to_have_count(2)
    finally:
        await context.close()


async def test_issue_30_no_page_scrolls_sideways_at_390px(site, chrome):
    from playwright.async_api import expect

    d, base, client = site
    context, page = await logged_in_page(chrome, client, base,
                                         viewport={"width": 390, "height": 844})
    try:
        for path in (session_path(), session_path() + "&page=5", "/search?q=" + RARE,
                     "/search?q=Question", "/timeline", "/sessions"):
            await page.goto(base + path)
            await expect(page.locator("main h1")).to_be_visible()
            for det in await page.locator("details").all():  # open what is folded
                await det.evaluate("d => d.open = true")
            width = await page.evaluate("document.documentElement.scrollWidth")
            assert width <= 390, f"{path} scrolls sideways at 390 px ({width} px)"
            if path == "/timeline":
                await shot(page, "timeline-phone")
            elif path == session_path():
                await page.screenshot(path=str(SHOTS / "session-phone.png"))
    finally:
        await context.close()


async def test_issue_30_session_search_timeline_work_without_javascript(site, chrome):
    from playwright.async_api import expect

    d, base, client = site
    context, page = await logged_in_page(chrome, client, base, java_script_enabled=False)
    try:
        await page.get_by_role("link", name="Timeline", exact=True).click()
        await expect(page.locator("section.day").first).to_be_visible()
        await page.locator("a.tl-title").first.click()
        await expect(page.locator("#h-messages")).to_contain_text("page 1 of 5")
        await page.locator("nav.pager").first.get_by_role("link", name="Later →").click()
        await expect(page.locator("#h-messages")).to_contain_text("page 2 of 5")
        await page.get_by_label("Turn", exact=True).fill("61")
        await page.get_by_role("button", name="Go").click()
        await page.wait_for_url(re.compile(r"page=4#turn-61$"))
        await expect(page.locator("#turn-61")).to_be_in_viewport()
        details = page.locator("li.msg details").first
        await details.locator("summary").click()  # <details> opens without script
        await expect(details.locator("pre.tool")).to_be_visible()
        await page.get_by_role("link", name="Search", exact=True).click()
        await page.get_by_label("Words to find").fill(RARE)
        await page.get_by_label("Words to find").press("Enter")
        await page.locator("a.hit-link").first.click()
        await expect(page.locator("li.msg.focus")).to_contain_text(RARE)
    finally:
        await context.close()
