"""The web page's access rules and pages over real HTTP (no browser): one-time links,
the session cookie, Origin and CSRF checks, the Host check, no CORS, HTML errors."""

from __future__ import annotations

import asyncio
import re
from urllib.parse import quote

import aiohttp

from memoryd.cli.commands import main
from memoryd.web.auth import COOKIE, LINK_TTL_S, Access
from tests.helpers import wait_for, write_jsonl
from tests.web.conftest import CJK_SESSION, login_url


def jar() -> aiohttp.ClientSession:
    return aiohttp.ClientSession(cookie_jar=aiohttp.CookieJar(unsafe=True))


async def logged_in(http: aiohttp.ClientSession, client) -> None:
    async with http.get(await login_url(client)) as r:
        assert r.status == 200, await r.text()


def csrf_of(html: str) -> str:
    return re.search(r'name="csrf" value="([^"]+)"', html).group(1)


async def test_page_without_cookie_shows_only_how_to_log_in(site):
    d, base, client = site
    async with jar() as http:
        for path in ("/", "/search?q=数据库", "/sessions", "/memory", "/context?prompt=x",
                     f"/sessions/{CJK_SESSION}"):
            async with http.get(base + path) as r:
                html = await r.text()
                assert r.status == 403, path
                assert "memoryctl open" in html
                assert "数据库" not in html and "Overview</h1>" not in html


async def test_login_link_works_once_and_sets_a_strict_httponly_cookie(site):
    d, base, client = site
    url = await login_url(client)
    assert url.startswith(base + "/login?token=")
    async with jar() as http:
        async with http.get(url) as r:
            assert r.status == 200
            cookie = r.headers["Set-Cookie"]
        assert f"{COOKIE}=" in cookie and "HttpOnly" in cookie
        assert "SameSite=Strict" in cookie and "Path=/" in cookie
        async with http.get(base + "/") as r:
            assert r.status == 200 and "Overview</h1>" in await r.text()
            assert "Access-Control-Allow-Origin" not in r.headers
            assert "frame-ancestors 'none'" in r.headers["Content-Security-Policy"]
    async with jar() as other:
        async with other.get(url) as r:  # the same link again
            assert r.status == 403 and "expired" in await r.text()
        async with other.get(base + "/") as r:
            assert r.status == 403


def test_login_link_expires():
    now = [1000.0]
    access = Access(clock=lambda: now[0])
    late, fresh = access.mint_link(), access.mint_link()
    now[0] += LINK_TTL_S + 1
    assert access.redeem(late) is None
    assert access.redeem("not-a-token") is None
    fresh2 = access.mint_link()
    assert access.redeem(fresh2) is not None and access.redeem(fresh) is None


async def test_posts_need_our_origin_and_the_csrf_token(site):
    d, base, client = site
    memory_file = d.memory.path
    async with jar() as http:
        await logged_in(http, client)
        async with http.get(base + "/memory") as r:
            token = csrf_of(await r.text())
        form = {"csrf": token, "content": "用 uv 管理依赖"}
        async with http.post(base + "/memory/add", data=form,
                             headers={"Origin": "http://evil.example"}) as r:
            assert r.status == 403 and "Origin" in await r.text()
        async with http.post(base + "/memory/add", data={"content": "x"},
                             headers={"Origin": base}) as r:
            assert r.status == 403
        assert not memory_file.exists() or "uv" not in memory_file.read_text()
        async with http.post(base + "/memory/add", data=form, headers={"Origin": base}) as r:
            assert r.status == 200, await r.text()
            assert "用 uv 管理依赖" in await r.text()
        assert "用 uv 管理依赖" in memory_file.read_text(encoding="utf-8")


async def test_host_check_holds_for_the_page(site):
    d, base, client = site
    async with jar() as http:
        await logged_in(http, client)
        async with http.get(base + "/", headers={"Host": "evil.example"}) as r:
            assert r.status == 403


async def test_the_cookie_opens_no_api_route_and_minting_needs_the_token(site):
    d, base, client = site
    async with jar() as http:
        await logged_in(http, client)
        async with http.get(base + "/v1/status") as r:
            assert r.status == 401
        async with http.post(base + "/v1/web/login") as r:
            assert r.status == 401


async def test_bad_input_is_a_400_page_naming_the_field(site):
    d, base, client = site
    async with jar() as http:
        await logged_in(http, client)
        async with http.get(base + "/search?q=x&since=yesterday") as r:
            assert r.status == 400 and "since" in await r.text()
        async with http.get(base + "/context?prompt=x&cwd=relative/dir") as r:
            assert r.status == 400 and "cwd" in await r.text()
        async with http.get(base + "/sessions?limit=abc") as r:
            assert r.status == 400 and "limit" in await r.text()
        async with http.get(base + "/sessions/no-such-session") as r:
            assert r.status == 404 and "no-such-session" in await r.text()


async def test_chinese_search_highlights_and_links_to_the_turn(site):
    d, base, client = site
    async with jar() as http:
        await logged_in(http, client)
        async with http.get(base + "/search", params={"q": "数据库迁移"}) as r:
            html = await r.text()
        assert r.status == 200
        assert "<mark>数据库迁移</mark>" in html
        hit = re.search(r'href="(/sessions/cjk-0001\?agent=claude-code&amp;unit=\d+#u\d+)"', html)
        assert hit, html
        async with http.get(base + hit.group(1).replace("&amp;", "&")) as r:
            page = await r.text()
        assert r.status == 200 and 'class="msg' in page and " focus" in page
        assert "<details" in page and "ls migrations" in page  # the tool call, folded


async def test_export_and_forget_a_session(site):
    d, base, client = site
    path = f"/sessions/{quote(CJK_SESSION)}"
    async with jar() as http:
        await logged_in(http, client)
        async with http.get(base + path + "/export?agent=claude-code") as r:
            md = await r.text()
            assert "attachment" in r.headers["Content-Disposition"]
        assert "请帮我修复数据库迁移的错误" in md and "ls migrations" in md
        async with http.get(base + path + "/forget?agent=claude-code") as r:
            token = csrf_of(await r.text())
            assert "cannot be undone" in await r.text()
        async with http.post(base + path + "/forget?agent=claude-code",
                             data={"csrf": token}, headers={"Origin": base}) as r:
            assert r.status == 200 and "Forgot claude-code session" in await r.text()
        async with http.get(base + path) as r:
            assert r.status == 404
    assert (await client.search(query="数据库迁移"))["total"] == 0


async def test_memoryctl_open_prints_a_working_link(site, capsys):
    d, base, client = site
    code = await asyncio.to_thread(main, ["--socket", str(client.sync.socket_path), "open",
                                          "--no-browser"])
    out = capsys.readouterr().out.strip()
    assert code == 0 and out.startswith(base + "/login?token=")
    async with jar() as http:
        async with http.get(out) as r:
            assert r.status == 200
        async with http.get(base + "/sessions") as r:
            assert r.status == 200 and "Sessions</h1>" in await r.text()


async def test_static_files_need_no_login(site):
    d, base, client = site
    async with jar() as http:
        for path in ("/static/htmx.min.js", "/static/style.css"):
            async with http.get(base + path) as r:
                assert r.status == 200 and len(await r.read()) > 1000


async def test_memory_edit_from_a_stale_page_is_refused_and_loses_nothing(site):
    d, base, client = site
    await client.memory_add("部署用 systemd 用户服务", "manual")
    async with jar() as http:
        await logged_in(http, client)
        async with http.get(base + "/memory?edit=1") as r:
            html = await r.text()
        token = csrf_of(html)
        version = re.search(r'name="version" value="([0-9a-f]{16})"', html).group(1)
        await client.memory_add("另一个窗口加的条目", "manual")  # the file changes meanwhile
        form = {"csrf": token, "line": "1", "version": version, "content": "改过的"}
        async with http.post(base + "/memory/edit", data=form, headers={"Origin": base}) as r:
            assert r.status == 409, await r.text()
        text = d.memory.path.read_text(encoding="utf-8")
        assert "部署用 systemd 用户服务" in text and "另一个窗口加的条目" in text
        assert "改过的" not in text
        async with http.post(base + "/memory/delete", data={"csrf": token, "line": "x"},
                             headers={"Origin": base}) as r:
            assert r.status == 400 and "line" in await r.text()


async def test_summarize_from_the_session_page(site):
    from tests.helpers import wait_for

    d, base, client = site
    path = f"/sessions/{CJK_SESSION}"
    async with jar() as http:
        await logged_in(http, client)
        async with http.get(base + path + "?agent=claude-code") as r:
            token = csrf_of(await r.text())
        async with http.post(base + path + "/summarize?agent=claude-code",
                             data={"csrf": token}, headers={"Origin": base}) as r:
            assert r.status == 200 and "queued" in await r.text()

        async def summarized():
            s = await client.request("GET", f"/v1/sessions/{CJK_SESSION}/summary")
            return s["summary"]

        await wait_for(summarized, timeout=30)
        async with http.get(base + path + "?agent=claude-code") as r:
            html = await r.text()
        assert "No summary yet" not in html and "made by extractive" in html


async def test_overview_shows_what_consolidation_did_per_day(site):
    """The fixtures' days are history on first start: consolidated by themselves, and
    the overview lists each recent day's run with its counts."""
    d, base, client = site

    async def done() -> dict | None:
        h = (await client.status())["consolidation"]["history"]
        return h if h.get("looked") and h["days_left"] == 0 and h["days_done"] else None

    h = await wait_for(done, timeout=60)
    days = (await client.status())["consolidation"]["days"]
    async with jar() as http:
        await logged_in(http, client)
        async with http.get(base + "/") as r:
            html = await r.text()
    assert 'id="h-consolidation"' in html
    assert f"{h['days_done']} of {h['days_with_sessions']} days consolidated" in html
    assert days and f"<td>{days[0]['date']}</td>" in html and "(history)" in html


async def test_issue_30_markdown_in_a_turn_stays_inert(site, tmp_path):
    """Turns are rendered as markdown now: raw HTML, a javascript: link and an <img
    onerror> in one come out as text, while the markdown itself still renders."""
    d, base, client = site
    write_jsonl(tmp_path / "claude" / "xss" / "xss-0001.jsonl", [{
        "sessionId": "xss-0001", "cwd": "/home/u/x", "type": "user", "uuid": "x1",
        "parentUuid": None, "timestamp": "2026-01-06T10:00:00.000Z",
        "message": {"role": "user", "content": (
            '<script>alert(1)</script> [x](javascript:alert(1)) <img src=x onerror="alert(1)"> '
            '[ok](https://example.com) ![pic](https://example.com/p.png) **bold**')}}])

    async def ingested():
        rows = (await client.request("GET", "/v1/sessions?limit=50"))["sessions"]
        return any(r["session_id"] == "xss-0001" for r in rows)

    await wait_for(ingested, timeout=60)
    async with jar() as http:
        await logged_in(http, client)
        async with http.get(base + "/sessions/xss-0001") as r:
            html = await r.text()
        assert r.status == 200
        turn = html[html.index('class="content md"'):]
        turn = turn[:turn.index("</li>")]
        assert "<script" not in turn and "&lt;script&gt;alert(1)&lt;/script&gt;" in turn
        assert "javascript:" not in turn.replace("[x](javascript:alert(1))", "")
        assert "<img" not in turn and "&lt;img" in turn
        assert '<a href="https://example.com" rel="nofollow noopener noreferrer">ok</a>' in turn
        assert 'href="https://example.com/p.png"' in turn  # an image is only a link
        assert "<strong>bold</strong>" in turn


async def test_issue_30_bad_paging_input_is_a_400_naming_the_field(site):
    d, base, client = site
    path = f"/sessions/{CJK_SESSION}?agent=claude-code"
    async with jar() as http:
        await logged_in(http, client)
        for field, value in (("page", "0"), ("page", "x"), ("turn", "-1"),
                             ("unit", "99999999999999999999999")):
            async with http.get(base + path + f"&{field}={value}") as r:
                assert r.status == 400 and field in await r.text(), (field, value)
        async with http.get(base + path + "&page=999") as r:  # past the end: the last page
            assert r.status == 200 and "m001_initial.py" in await r.text()
        async with http.get(base + f"/sessions/{CJK_SESSION}/units/99999999999999999999999"
                            "?agent=claude-code") as r:
            assert r.status == 404
        async with http.get(base + "/timeline?until=yesterday") as r:
            assert r.status == 400 and "until" in await r.text()


async def test_issue_28_logout_from_another_origin_is_refused_and_keeps_the_session(site):
    d, base, client = site
    async with jar() as http:
        await logged_in(http, client)
        async with http.get(base + "/memory") as r:
            token = csrf_of(await r.text())
        for headers in ({"Origin": "http://evil.example"}, {"Origin": "null"},
                        {"Referer": "http://evil.example/page"}, {}):
            async with http.post(base + "/logout", data={"csrf": token},
                                 headers=headers) as r:
                assert r.status == 403, (headers, await r.text())
                assert COOKIE not in r.headers.get("Set-Cookie", ""), headers
            async with http.get(base + "/sessions") as r:
                assert r.status == 200, headers  # still logged in
        async with http.post(base + "/logout", data={"csrf": "stale"},
                             headers={"Origin": base}) as r:
            assert r.status == 403
        async with http.post(base + "/logout", data={"csrf": token},
                             headers={"Origin": base}) as r:
            assert r.status == 200 and f"{COOKIE}=" in r.headers["Set-Cookie"]
        async with http.get(base + "/sessions") as r:
            assert r.status == 403  # logged out


async def test_issue_28_every_post_checks_the_origin(site):
    """The API's own POSTs too: a browser page elsewhere that somehow held the token (or a
    route that needs none) still cannot make one; clients that send no Origin are unchanged."""
    d, base, client = site
    auth = {"Authorization": f"Bearer {d.paths.token_file.read_text().strip()}"}
    async with aiohttp.ClientSession() as http:
        async with http.post(base + "/v1/memory/entries", json={"content": "evil"},
                             headers={**auth, "Origin": "http://evil.example"}) as r:
            body = await r.json()
            assert r.status == 403 and body["error"]["code"] == "forbidden_origin"
        async with http.post(base + "/v1/web/login",
                             headers={**auth, "Origin": "http://evil.example"}) as r:
            assert r.status == 403
        async with http.get(base + "/v1/health",
                            headers={**auth, "Origin": "http://evil.example"}) as r:
            assert r.status == 200  # reading is not a change (and no CORS header lets it out)
        async with http.post(base + "/v1/memory/entries", json={"content": "mine"},
                             headers=auth) as r:
            assert r.status == 201, await r.text()
    assert "evil" not in d.memory.path.read_text(encoding="utf-8")
