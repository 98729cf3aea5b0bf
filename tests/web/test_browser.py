"""The web page in a real browser: Debian's Chromium driven by Playwright, against a
live daemon on fixtures. Screenshots of each page go to .screenshots/ (gitignored);
the README shows those of tests/web/test_screenshots.py, copied to docs/screenshots/.

Skipped only when there is no Chromium and CI is unset; in CI a missing browser fails
(.ci/run installs it)."""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

import pytest
import pytest_asyncio
from aiohttp import web

from tests.conftest import FIXTURES
from tests.web.conftest import CJK_CWD, CJK_SESSION, live_site, login_url

REPO = Path(__file__).resolve().parents[2]
SHOTS = REPO / ".screenshots"
CHROMIUM = Path(os.environ.get("MEMORYD_CHROMIUM", "/usr/bin/chromium"))
ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
        "--disable-background-networking", "--disable-component-update", "--disable-sync",
        "--disable-dev-shm-usage"]

# one daemon and one Chromium for the module: a browser start costs seconds on a busy machine
pytestmark = [pytest.mark.browser, pytest.mark.timeout(240),
              pytest.mark.asyncio(loop_scope="module")]


def chromium() -> Path:
    if CHROMIUM.exists():
        return CHROMIUM
    if os.environ.get("CI"):
        pytest.fail(f"no Chromium at {CHROMIUM}: CI must run the browser tests "
                    "(.ci/run installs it with apt-get)")
    pytest.skip(f"no Chromium at {CHROMIUM} (apt-get install -y chromium); "
                "CI installs it and runs these tests")


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def browser(tmp_path_factory):
    exe = chromium()
    from playwright.async_api import async_playwright, expect

    expect.set_options(timeout=45_000)

    SHOTS.mkdir(exist_ok=True)
    profile = tmp_path_factory.mktemp("chromium-profile")
    async with async_playwright() as p:
        ctx = await p.chromium.launch_persistent_context(
            str(profile), executable_path=str(exe), headless=True, args=ARGS,
            viewport={"width": 1280, "height": 900}, locale="zh-CN")
        ctx.set_default_timeout(45_000)  # a loaded 2-core machine is slow
        try:
            yield ctx
        finally:
            await ctx.close()
    shutil.rmtree(profile, ignore_errors=True)


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def site(tmp_path_factory):
    chromium()  # skip before starting a daemon for nothing
    async with live_site(tmp_path_factory.mktemp("web"), FIXTURES) as s:
        yield s


@pytest_asyncio.fixture(loop_scope="module")
async def page(browser):
    await browser.clear_cookies()
    page = await browser.new_page()

    async def accept(dialog):
        await dialog.accept()

    page.on("dialog", accept)
    yield page
    await page.close()


async def log_in(page, client, base: str) -> None:
    """Follow a one-time link; the page moves on to the overview by itself."""
    await page.goto(await login_url(client))
    await page.wait_for_url(base + "/")


async def shot(page, name: str) -> None:
    await page.screenshot(path=str(SHOTS / f"{name}.png"), full_page=True)


async def test_browser_log_in_search_session_memory_context(site, page):
    from playwright.async_api import expect

    d, base, client = site

    # without the cookie: how to log in, nothing else
    resp = await page.goto(base + "/")
    assert resp.status == 403
    await expect(page.locator("main")).to_contain_text("memoryctl open")
    await shot(page, "login")

    # the one-time link
    resp = await page.goto(await login_url(client))
    assert resp.status == 200
    # the link lands on the overview by itself (issue 30): no interstitial to click
    await expect(page.get_by_role("heading", name="Overview", exact=True)).to_be_visible()
    assert page.url == base + "/"
    await expect(page.locator("main")).to_contain_text("caught up")
    # the charts are drawn (SVG, no script needed) with their numbers a click away
    await expect(page.locator("#chart-messages svg.chart")).to_be_visible()
    await expect(page.locator("#chart-llm svg.chart")).to_be_visible()
    await shot(page, "overview")

    # search in Chinese, highlighted; a hit opens its session at that turn
    await page.get_by_role("link", name="Search", exact=True).click()
    await page.get_by_label("Words to find").fill("数据库迁移")
    await page.get_by_label("Words to find").press("Enter")
    first = page.locator("li.hit mark").first
    await expect(first).to_have_text("数据库迁移")
    await shot(page, "search")
    await page.locator("a.hit-link").first.click()
    await expect(page.locator("li.msg.focus")).to_be_visible()
    assert f"/sessions/{CJK_SESSION}" in page.url
    await expect(page.locator("li.msg.focus")).to_contain_text("数据库迁移")
    tool = page.locator("li.msg.tool_call details")
    await expect(tool).to_have_count(1)
    assert await tool.get_attribute("open") is None  # folded
    await expect(tool.locator("summary")).to_contain_text("Bash")
    await shot(page, "session")

    # the sessions list, then a session from it
    await page.get_by_role("link", name="Sessions", exact=True).click()
    await expect(page.get_by_role("heading", name="Sessions")).to_be_visible()
    await expect(page.locator("table.sessions tbody tr")).to_have_count(3)
    await shot(page, "sessions")
    await page.locator("table.sessions tbody a").first.click()
    await expect(page.get_by_role("heading", name="Rolling summary")).to_be_visible()
    await expect(page.get_by_role("button", name="Summarize now")).to_be_visible()

    # memory: add, edit, delete; each lands in MEMORY.md on disk
    memory_file = d.memory.path
    await page.get_by_role("link", name="Memory", exact=True).click()
    await page.get_by_label("What to remember").fill("项目用 uv 管理依赖；测试用 pytest")
    await page.get_by_role("button", name="Add", exact=True).click()
    await expect(page.locator(".notice")).to_contain_text("added as line")
    text = memory_file.read_text(encoding="utf-8")
    assert "项目用 uv 管理依赖" in text and "测试用 pytest" in text
    line = next(i for i, raw in enumerate(text.splitlines(), 1) if "项目用 uv" in raw)
    await shot(page, "memory")
    await page.get_by_role("link", name=f"Edit entry {line}").click()
    box = page.get_by_role("textbox", name=f"Entry {line}", exact=True)
    await box.fill("项目用 uv 管理依赖\n发布前跑 ruff")
    await page.get_by_role("button", name="Save").click()
    await expect(page.locator(".notice")).to_contain_text(f"line {line} saved")
    text = memory_file.read_text(encoding="utf-8")
    assert "发布前跑 ruff" in text and "测试用 pytest" not in text
    await page.get_by_role("button", name=f"Delete entry {line}").click()
    await expect(page.locator(".notice")).to_contain_text(f"line {line} deleted")
    assert "项目用 uv" not in memory_file.read_text(encoding="utf-8")

    # context preview: the exact block, tokens per item, why each was recalled
    await page.get_by_role("link", name="Context", exact=True).click()
    await page.get_by_label("Prompt").fill("数据库迁移 报错")
    await page.get_by_label("Project directory").fill(CJK_CWD)
    await page.get_by_role("button", name="Preview").click()
    await expect(page.locator("#block")).to_contain_text("<memoryd-context>")
    await expect(page.locator("#block")).to_contain_text("数据库迁移")
    recalled = page.locator("#items tbody tr", has_text="recalled").first
    await expect(recalled).to_be_visible()
    await expect(recalled.locator("td").nth(2)).to_have_text(re.compile(r"^\d+$"))
    await shot(page, "context")


async def test_browser_phone_width_and_keyboard(site, page):
    from playwright.async_api import expect

    d, base, client = site
    await page.set_viewport_size({"width": 390, "height": 844})
    await log_in(page, client, base)
    await page.goto(base + "/search?q=数据库")
    await expect(page.locator("li.hit").first).to_be_visible()
    width = await page.evaluate("document.documentElement.scrollWidth")
    assert width <= 390, f"the page scrolls sideways at phone width ({width}px)"
    await shot(page, "search-phone")

    # the overview with its charts fits the phone's width too
    await page.goto(base + "/")
    await expect(page.locator("#chart-messages svg.chart")).to_be_visible()
    width = await page.evaluate("document.documentElement.scrollWidth")
    assert width <= 390, f"the overview scrolls sideways at phone width ({width}px)"
    await shot(page, "dashboard-phone")

    # keyboard alone: the skip link comes first, then the navigation
    await page.goto(base + "/")
    await page.keyboard.press("Tab")
    focused = await page.evaluate("document.activeElement.textContent")
    assert focused.strip() == "Skip to content"
    await page.keyboard.press("Tab")
    await page.keyboard.press("Tab")
    assert (await page.evaluate("document.activeElement.textContent")).strip() == "Overview"
    for _ in range(2):
        await page.keyboard.press("Tab")
    assert (await page.evaluate("document.activeElement.textContent")).strip() == "Sessions"
    await page.keyboard.press("Enter")
    await expect(page.get_by_role("heading", name="Sessions")).to_be_visible()
    await shot(page, "overview-phone")


async def test_browser_403_without_cookie_and_on_a_foreign_origin(site, page):
    from playwright.async_api import expect

    d, base, client = site
    resp = await page.goto(base + "/memory")
    assert resp.status == 403
    await log_in(page, client, base)
    resp = await page.goto(base + "/memory")
    assert resp.status == 200

    # another local site (same-site: the cookie goes along) posts to the page
    async def evil(request: web.Request) -> web.Response:
        return web.Response(content_type="text/html", text=(
            f'<form method="post" action="{base}/memory/add">'
            '<input name="content" value="injected by another site">'
            '<input name="csrf" value="guess"><button>go</button></form>'))

    app = web.Application()
    app.router.add_get("/", evil)
    runner = web.AppRunner(app)
    await runner.setup()
    site2 = web.TCPSite(runner, "127.0.0.1", 0)
    await site2.start()
    port = site2._server.sockets[0].getsockname()[1]
    try:
        await page.goto(f"http://127.0.0.1:{port}/")
        async with page.expect_response(base + "/memory/add") as info:
            await page.get_by_role("button", name="go").click()
        resp = await info.value
        assert resp.status == 403
        await expect(page.locator("main")).to_contain_text("Origin")
    finally:
        await runner.cleanup()
    memory_file = d.memory.path
    assert not memory_file.exists() or "injected" not in memory_file.read_text()
    await shot(page, "forbidden-origin")
