"""The memory API (/v1/memory) through a real TCP socket."""

from __future__ import annotations

import asyncio
import io
from datetime import date

import pytest

from memoryd.events import EventBus
from memoryd.memory import MemoryFile
from memoryd.server import openapi
from memoryd.server.app import ROUTES, make_app
from memoryd.http.json_io import MAX_BODY
from memoryd.http.services import Services
from memoryd.daemon.store_index import open_store

DAY = date(2025, 3, 14)


@pytest.fixture
async def store(tmp_path):
    s = await open_store(tmp_path / "t.db")
    yield s
    await s.close()


@pytest.fixture
def bus():
    return EventBus()


@pytest.fixture
def path(tmp_path):
    return tmp_path / "data" / "memory" / "MEMORY.md"


@pytest.fixture
def memory(path, bus):
    return MemoryFile(path, events=bus, today=lambda: DAY, poll_interval=0, max_entries=5)


@pytest.fixture
async def client(aiohttp_client, store, memory, bus):
    async def status():
        return {}

    app = make_app(Services(store=store, status=status, version="t", events=bus,
                            memory=memory))
    return await aiohttp_client(app)


async def call(client, method, url, expect=200, **kw):
    r = await client.request(method, url, **kw)
    body = await r.json()
    assert r.status == expect, body
    return body


async def bad(client, method, url, field, status=400, code="bad_request", **kw):
    err = (await call(client, method, url, expect=status, **kw))["error"]
    assert err["code"] == code and err.get("field") == field, err
    return err["message"]


async def add(client, content, source="manual", expect=201):
    return await call(client, "POST", "/v1/memory/entries", expect,
                      json={"content": content, "source": source})


# --- read, add ------------------------------------------------------------------------


async def test_memory_read_empty(client, path):
    body = await call(client, "GET", "/v1/memory")
    assert body["content"] == "" and body["entries"] == [] and body["total"] == 0
    assert body["limit"] == 5 and body["path"] == str(path) and len(body["version"]) == 16
    assert body["invalid"] == []


async def test_memory_add_then_read_with_line_numbers(client, path):
    path.parent.mkdir(parents=True)
    path.write_text("# Memory\n\n")
    assert await add(client, "偏好简洁的中文回答；uses uv", "claude-code") == {
        "line": 3, "total": 1, "duplicate": False, "added": ["偏好简洁的中文回答", "uses uv"],
        "duplicates": []}
    body = await call(client, "GET", "/v1/memory")
    assert body["content"] == "# Memory\n\n2025-03-14|claude-code|偏好简洁的中文回答；uses uv\n"
    assert body["entries"] == [{"line": 3, "date": "2025-03-14", "source": "claude-code",
                                "items": ["偏好简洁的中文回答", "uses uv"],
                                "text": "2025-03-14|claude-code|偏好简洁的中文回答；uses uv"}]


async def test_memory_add_multiline_content_and_default_source(client):
    r = await call(client, "POST", "/v1/memory/entries", 201, json={"content": " a \n\nb；c "})
    assert r["added"] == ["a", "b", "c"]
    assert (await call(client, "GET", "/v1/memory"))["entries"][0]["source"] == "manual"


async def test_memory_add_duplicate_returns_existing_line(client):
    await add(client, "first")
    await add(client, "uses uv")
    r = await add(client, "  USES UV ", "codex", expect=200)
    assert r == {"line": 2, "total": 2, "duplicate": True, "added": [],
                 "duplicates": ["USES UV"]}
    assert (await call(client, "GET", "/v1/memory"))["total"] == 2


@pytest.mark.parametrize(("body", "field"), [
    ({"content": "", "source": "m"}, "content"),
    ({"content": "  ；\n ", "source": "m"}, "content"),
    ({"content": "x" * 2001, "source": "m"}, "content"),
    ({"content": "ring \x07", "source": "m"}, "content"),
    ({"content": "\ud800", "source": "m"}, "content"),
    ({"content": 5, "source": "m"}, "content"),
    ({"content": ["a"], "source": "m"}, "content"),
    ({"source": "m"}, "content"),
    ({"content": "x", "source": "a|b"}, "source"),
    ({"content": "x", "source": " "}, "source"),
    ({"content": "x", "source": ""}, "source"),
    ({"content": "x", "source": None}, "source"),
    ({"content": "x", "source": "s" * 201}, "source"),
    ({"content": "x", "source": "m", "when": "now"}, "when"),
])
async def test_memory_add_bad_input_names_the_field(client, body, field):
    await bad(client, "POST", "/v1/memory/entries", field, json=body)


async def test_memory_add_malformed_json_and_bodies(client):
    url = "/v1/memory/entries"
    hdr = {"Content-Type": "application/json"}
    assert "malformed JSON" in await bad(client, "POST", url, "body", data=b"{nope", headers=hdr)
    await bad(client, "POST", url, "body", data=b"[1]", headers=hdr)
    await bad(client, "POST", url, "body", data=b"\xff\xfe", headers=hdr)
    await bad(client, "POST", url, "content", data=b"", headers=hdr)  # {} : content missing
    await bad(client, "POST", url, "body", data=io.BytesIO(b"x" * (MAX_BODY + 1)), headers=hdr)


async def test_memory_full_is_409_naming_the_limit(client, path):
    for i in range(5):
        await add(client, f"item {i}")
    msg = await bad(client, "POST", "/v1/memory/entries", "content", status=409,
                    code="memory_full", json={"content": "one too many"})
    assert "limit is 5" in msg
    assert (await call(client, "GET", "/v1/memory"))["total"] == 5
    assert "one too many" not in path.read_text()
    await add(client, "item 3", expect=200)  # a duplicate is still answered


async def test_memory_unreadable_file_is_409_not_500(client, path):
    path.parent.mkdir(parents=True)
    path.write_bytes(b"2025-01-01|m|\xc4\xe3\xba\xc3\n")
    for method, url, kw in [("GET", "/v1/memory", {}),
                            ("GET", "/v1/memory/stats", {}),
                            ("POST", "/v1/memory/entries", {"json": {"content": "x"}})]:
        err = (await call(client, method, url, 409, **kw))["error"]
        assert err["code"] == "memory_unreadable" and "UTF-8" in err["message"]


async def test_memory_io_error_is_reported(client, path):
    path.parent.parent.mkdir(parents=True)
    path.parent.write_text("not a dir")
    err = (await call(client, "POST", "/v1/memory/entries", 500,
                      json={"content": "x"}))["error"]
    assert err["code"] == "memory_io" and "cannot" in err["message"]


# --- replace --------------------------------------------------------------------------


async def test_memory_replace_then_read(client):
    text = "# 记忆\nfree prose | with a pipe\n2025-01-01|manual|一；二\n"
    r = await call(client, "PUT", "/v1/memory", json={"content": text})
    assert r["total"] == 1 and len(r["version"]) == 16
    body = await call(client, "GET", "/v1/memory")
    assert body["content"] == text and body["version"] == r["version"]
    assert body["entries"][0]["line"] == 3 and body["entries"][0]["items"] == ["一", "二"]


@pytest.mark.parametrize(("content", "words"), [
    ("ok\n2025-02-30|manual|x\n", ["line 2", "invalid date"]),
    ("2025-01-01|manual|x\n\n2025-01-01||x\n", ["line 3", "empty source"]),
    ("2025-01-01|manual|\n", ["line 1", "no items"]),
    ("2025-01-01|manual\n", ["line 1", "'|'"]),
    ("a\nb\x00c\n", ["line 2", "control character U+0000"]),
    ("a\r\nb\n", ["line 1", "U+000D"]),
])
async def test_memory_replace_validation_names_the_line(client, path, content, words):
    msg = await bad(client, "PUT", "/v1/memory", "content", json={"content": content})
    assert all(w in msg for w in words), msg
    assert not path.exists()


async def test_memory_replace_limits(client, memory):
    many = "".join(f"2025-01-01|m|item {i}\n" for i in range(6))
    msg = await bad(client, "PUT", "/v1/memory", "content", status=409, code="memory_full",
                    json={"content": many})
    assert "at most 5" in msg
    memory.max_bytes = 100
    assert "byte limit" in await bad(client, "PUT", "/v1/memory", "content",
                                     json={"content": "x" * 101})


@pytest.mark.parametrize(("body", "field"), [
    ({}, "content"), ({"content": None}, "content"), ({"content": 1}, "content"),
    ({"content": "", "version": "nothex"}, "version"), ({"content": "", "extra": 1}, "extra"),
])
async def test_memory_replace_bad_input(client, body, field):
    await bad(client, "PUT", "/v1/memory", field, json=body)


async def test_memory_replace_with_stale_version_keeps_the_edit(client, path):
    v = (await call(client, "PUT", "/v1/memory", json={"content": "# a\n"}))["version"]
    path.write_text("# a\n# typed in vim\n")
    msg = await bad(client, "PUT", "/v1/memory", "version", status=409,
                    code="version_conflict", json={"content": "# b\n", "version": v})
    assert v in msg
    assert path.read_text() == "# a\n# typed in vim\n"


# --- delete ---------------------------------------------------------------------------


async def test_memory_delete_entries(client, path):
    await call(client, "PUT", "/v1/memory",
               json={"content": "# h\n2025-01-01|m|a\n2025-01-02|m|b\n2025-01-03|m|c\n"})
    r = await call(client, "POST", "/v1/memory/entries/delete", json={"lines": [4, 2]})
    assert r["total"] == 1
    assert path.read_text() == "# h\n2025-01-02|m|b\n"


@pytest.mark.parametrize(("lines", "words"), [
    ([1], ["line 1 not an entry"]), ([0], ["out of range"]), ([3], ["out of range"]),
    ([2, 9], ["line 9 out of range"]),
])
async def test_memory_delete_refuses_non_entries(client, path, lines, words):
    await call(client, "PUT", "/v1/memory", json={"content": "# h\n2025-01-01|m|a\n"})
    msg = await bad(client, "POST", "/v1/memory/entries/delete", "lines", json={"lines": lines})
    assert all(w in msg for w in words), msg
    assert path.read_text() == "# h\n2025-01-01|m|a\n"


@pytest.mark.parametrize(("body", "field"), [
    ({}, "lines"), ({"lines": []}, "lines"), ({"lines": 2}, "lines"),
    ({"lines": ["2"]}, "lines.0"), ({"lines": [True]}, "lines.0"),
    ({"lines": [1.5]}, "lines.0"), ({"lines": [2], "all": True}, "all"),
])
async def test_memory_delete_bad_input(client, body, field):
    await bad(client, "POST", "/v1/memory/entries/delete", field, json=body)


async def test_memory_delete_with_stale_version(client, path):
    await add(client, "a")
    v = (await call(client, "GET", "/v1/memory"))["version"]
    path.write_text("# new first line\n" + path.read_text())
    await bad(client, "POST", "/v1/memory/entries/delete", "version", status=409,
              code="version_conflict", json={"lines": [1], "version": v})
    assert "2025-03-14|manual|a" in path.read_text()


# --- recent, stats, search ------------------------------------------------------------

LOG = ("2025-01-05|claude-code|部署在 fly.io；数据库是 PostgreSQL\n"
       "# prose\n"
       "2025-02-01|manual|prefers uv\n"
       "2025-01-20|codex|tests use pytest-aiohttp\n"
       "2025-02-01|claude-code|API 在 memoryd/server\n")


@pytest.fixture
async def filled(client):
    await call(client, "PUT", "/v1/memory", json={"content": LOG})
    return client


async def test_memory_recent_newest_first_by_date_then_line(filled):
    body = await call(filled, "GET", "/v1/memory/recent", params={"count": "3"})
    assert [e["line"] for e in body["entries"]] == [5, 3, 4]
    body = await call(filled, "GET", "/v1/memory/recent")
    assert [e["line"] for e in body["entries"]] == [5, 3, 4, 1]


@pytest.mark.parametrize("query", [{"count": "0"}, {"count": "201"}, {"count": "ten"},
                                   {"count": "1.5"}, {"count": ""}])
async def test_memory_recent_bad_count(filled, query):
    await bad(filled, "GET", "/v1/memory/recent", "count", params=query)


async def test_memory_recent_unknown_param(filled):
    await bad(filled, "GET", "/v1/memory/recent", "limit", params={"limit": "3"})


async def test_memory_stats(filled):
    assert await call(filled, "GET", "/v1/memory/stats") == {
        "total": 4, "limit": 5, "per_source": {"claude-code": 2, "codex": 1, "manual": 1},
        "first_date": "2025-01-05", "last_date": "2025-02-01", "invalid_lines": 0}


async def test_memory_search_cjk_and_modes(filled):
    r = await call(filled, "POST", "/v1/memory/search", json={"keywords": "部署"})
    assert r["total"] == 1 and r["message"] == "1 matches, showing 1"
    assert r["results"][0]["line"] == 1 and r["results"][0]["items"][0] == "部署在 fly.io"
    r = await call(filled, "POST", "/v1/memory/search",
                   json={"keywords": ["postgresql", "uv"], "match_mode": "or"})
    assert [e["line"] for e in r["results"]] == [3, 1]
    r = await call(filled, "POST", "/v1/memory/search",
                   json={"keywords": "api server", "match_mode": "and", "max_results": 1})
    assert [e["line"] for e in r["results"]] == [5]


async def test_memory_search_max_results(filled):
    r = await call(filled, "POST", "/v1/memory/search",
                   json={"keywords": ["a"], "max_results": 2})
    assert r["total"] == 4 and r["shown"] == 2 and r["message"] == "4 matches, showing 2"


async def test_memory_search_no_match_never_dumps(filled):
    r = await call(filled, "POST", "/v1/memory/search",
                   json={"keywords": ["kubernetes", "k8s"], "match_mode": "and"})
    assert r == {"total": 0, "shown": 0, "message": "0 matches, showing 0", "results": []}


@pytest.mark.parametrize(("body", "field"), [
    ({}, "keywords"), ({"keywords": ""}, "keywords"), ({"keywords": "   "}, "keywords"),
    ({"keywords": []}, "keywords"), ({"keywords": ["ok", " "]}, "keywords"),
    ({"keywords": 3}, "keywords"), ({"keywords": ["x" * 201]}, "keywords"),
    ({"keywords": ["ok", 3]}, "keywords.1"), ({"keywords": None}, "keywords"),
    ({"keywords": "x", "match_mode": "xor"}, "match_mode"),
    ({"keywords": "x", "max_results": 0}, "max_results"),
    ({"keywords": "x", "max_results": 201}, "max_results"),
    ({"keywords": "x", "max_results": "5"}, "max_results"),
    ({"keywords": "x", "q": "y"}, "q"),
])
async def test_memory_search_bad_input(filled, body, field):
    msg = await bad(filled, "POST", "/v1/memory/search", field, json=body)
    assert msg.startswith(field)


def test_memory_routes_are_in_the_openapi_document():
    doc = openapi.document(ROUTES, "t")
    assert set(doc["paths"]["/v1/memory"]) == {"get", "put"}
    for path in ("/v1/memory/entries", "/v1/memory/entries/delete", "/v1/memory/search"):
        assert "requestBody" in doc["paths"][path]["post"]
    assert doc["paths"]["/v1/memory/recent"]["get"]["parameters"][0]["name"] == "count"


async def test_memory_wrong_method_is_an_envelope(client):
    err = (await call(client, "DELETE", "/v1/memory", 405))["error"]
    assert err["code"] == "method_not_allowed"


# --- concurrency, edits made outside memoryd, events ----------------------------------


async def test_memory_concurrent_adds_lose_nothing(client, memory):
    memory.max_entries = 200
    rs = await asyncio.gather(*(add(client, f"并发 {i}", f"s{i}") for i in range(40)))
    assert sorted(r["line"] for r in rs) == list(range(1, 41))
    body = await call(client, "GET", "/v1/memory")
    assert body["total"] == 40
    assert {e["items"][0] for e in body["entries"]} == {f"并发 {i}" for i in range(40)}


async def test_memory_external_edit_between_calls_is_kept(client, path):
    await add(client, "from the api")
    text = path.read_text()
    path.write_text("# My notes\n" + text + "2025-03-01|vim|typed by hand\n")
    r = await add(client, "second from the api")
    assert r["line"] == 4 and r["total"] == 3
    assert path.read_text() == ("# My notes\n2025-03-14|manual|from the api\n"
                                "2025-03-01|vim|typed by hand\n"
                                "2025-03-14|manual|second from the api\n")
    body = await call(client, "GET", "/v1/memory")
    assert [e["source"] for e in body["entries"]] == ["manual", "vim", "manual"]


async def test_memory_writes_publish_memory_changed(client, path, bus):
    async with bus.subscribe() as q:
        await add(client, "a")
        await add(client, "a", expect=200)  # duplicate: nothing written, no event
        path.write_text(path.read_text() + "# edit\n")
        await call(client, "GET", "/v1/memory/stats")
        await call(client, "PUT", "/v1/memory", json={"content": "2025-01-01|m|x\n"})
        await call(client, "POST", "/v1/memory/entries/delete", json={"lines": [1]})
        events = [q.get_nowait() for _ in range(q.qsize())]
    assert [(e["event"], e["origin"], e.get("op"), e["total"]) for e in events] == [
        ("memory_changed", "api", "add", 1),
        ("memory_changed", "external", None, 1),
        ("memory_changed", "api", "replace", 1),
        ("memory_changed", "api", "delete", 0),
    ]
