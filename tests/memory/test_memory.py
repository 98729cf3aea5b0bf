"""MEMORY.md: the line format, validation, and the file (atomic writes, locks, edits
made outside memoryd)."""

from __future__ import annotations

import asyncio
import fcntl
import os
from datetime import date, datetime

import pytest

from memoryd.errors import BadRequestError, ConflictError
from memoryd.events import EventBus
from memoryd.memory import (
    SEP,
    Entry,
    MemoryFile,
    MemoryFullError,
    MemoryIOError,
    MemoryLockedError,
    MemoryUnreadableError,
    Problem,
    VersionConflictError,
    check_text,
    format_entry,
    format_lines,
    item_key,
    parse,
    parse_line,
    plan_add,
    plan_delete,
    search,
    split_items,
    split_lines,
    stats,
    validate_content,
)
from memoryd.paths import resolve_paths
from tests.helpers import wait_for

DAY = date(2025, 3, 14)

SAMPLE = (
    "# Long-term memory\n"
    "\n"
    "2025-01-02|manual|prefers uv over pip；tabs are banned\n"
    "Some prose the user typed | with a pipe.\n"
    "2025-02-10|claude-code|项目使用 PostgreSQL 16；部署在 fly.io\n"
    "2025-02-10|sess-42|the API lives in memoryd/server\n"
)


# --- the line format ------------------------------------------------------------------


def test_parse_line_entry_with_chinese_items():
    e = parse_line(5, "2025-02-10|claude-code|项目使用 PostgreSQL 16；部署在 fly.io")
    assert e == Entry(5, "2025-02-10", "claude-code", ("项目使用 PostgreSQL 16", "部署在 fly.io"),
                      "2025-02-10|claude-code|项目使用 PostgreSQL 16；部署在 fly.io")


def test_parse_line_strips_whitespace_and_drops_empty_items():
    e = parse_line(1, "2025-01-02| manual |  a ；；b  ；")
    assert isinstance(e, Entry) and e.source == "manual" and e.items == ("a", "b")


def test_parse_line_items_may_hold_a_pipe_and_ascii_semicolons():
    e = parse_line(1, "2025-01-02|manual|run a | b; then c")
    assert isinstance(e, Entry) and e.items == ("run a | b; then c",)


@pytest.mark.parametrize("line", ["# heading", "", "prose 2025-01-01|x|y", " 2025-01-01|x|y",
                                  "2025-1-1|x|y", "- 2025-01-01|x|y", "2025-01-01 x|y"])
def test_parse_line_other_text_is_not_an_entry(line):
    assert parse_line(1, line) is None


@pytest.mark.parametrize(("line", "reason"), [
    ("2025-02-30|manual|x", "invalid date"),
    ("2025-13-01|manual|x", "invalid date"),
    ("2025-01-01|manual", "missing the '|'"),
    ("2025-01-01||x", "empty source"),
    ("2025-01-01|  |x", "empty source"),
    ("2025-01-01|manual|", "no items"),
    ("2025-01-01|manual| ；  ；", "no items"),
])
def test_parse_line_malformed_entry_is_a_problem(line, reason):
    p = parse_line(3, line)
    assert isinstance(p, Problem) and p.line == 3 and reason in p.reason


def test_parse_line_tolerates_crlf_and_bom_from_editors():
    e = parse_line(1, "\ufeff2025-01-02|manual|x\r")
    assert isinstance(e, Entry) and e.date == "2025-01-02" and e.items == ("x",)


def test_parse_keeps_every_line_and_numbers_entries_from_one():
    doc = parse(SAMPLE)
    assert len(doc.lines) == 6 and doc.text == SAMPLE
    assert [e.line for e in doc.entries] == [3, 5, 6]
    assert doc.entries[1].items == ("项目使用 PostgreSQL 16", "部署在 fly.io")
    assert doc.problems == ()


def test_parse_empty_and_missing_final_newline():
    assert parse("").entries == () and parse("").lines == ()
    assert split_lines("a\nb") == ["a", "b"] == split_lines("a\nb\n")
    assert split_lines("a\n\n") == ["a", ""]
    assert format_lines(["a", ""]) == "a\n\n"


def test_split_lines_only_on_newline():
    assert split_lines("a\u2028b\x1cc\n") == ["a\u2028b\x1cc"]


def test_format_entry_round_trips():
    line = format_entry(DAY, "manual", ["喜欢简洁的回答", "uses fish shell"])
    assert line == "2025-03-14|manual|喜欢简洁的回答；uses fish shell"
    e = parse_line(1, line)
    assert isinstance(e, Entry) and e.items == ("喜欢简洁的回答", "uses fish shell")


# --- validation -----------------------------------------------------------------------


def test_validate_content_accepts_prose_and_entries():
    assert len(validate_content(SAMPLE).entries) == 3


def test_validate_content_names_the_bad_line():
    with pytest.raises(BadRequestError) as ei:
        validate_content("# m\n2025-01-01|manual|ok\n2025-02-31|manual|bad\n2025-01-01||x\n")
    assert ei.value.field == "content"
    assert "line 3" in ei.value.message and "invalid date" in ei.value.message
    assert "1 more" in ei.value.message


@pytest.mark.parametrize(("text", "line"), [("ok\nbad \x00 byte\n", 2), ("\x1b[31m", 1),
                                            ("a\rb", 1), ("x\n\n\x7f", 3), ("\ud800", 1),
                                            ("a\n\u2028", 2), ("\x85", 1)])
def test_validate_content_rejects_control_characters(text, line):
    with pytest.raises(BadRequestError) as ei:
        validate_content(text)
    assert ei.value.field == "content" and f"line {line}:" in ei.value.message


def test_validate_content_allows_tab_and_newline():
    validate_content("\tindented prose\n2025-01-01|manual|a\tb\n")


def test_validate_content_size_and_entry_limits():
    with pytest.raises(BadRequestError, match="byte limit"):
        validate_content("x" * 101, max_bytes=100)
    with pytest.raises(BadRequestError, match="byte limit"):
        validate_content("汉" * 34, max_bytes=100)  # 102 bytes in UTF-8
    three = "".join(f"2025-01-0{i}|m|item {i}\n" for i in range(1, 4))
    validate_content(three, max_entries=3)
    with pytest.raises(MemoryFullError, match="3 entries.*at most 2"):
        validate_content(three, max_entries=2)


def test_check_text_source_rejects_tab_and_newline():
    with pytest.raises(BadRequestError):
        check_text("a\tb", "source", allow_tab_newline=False)
    check_text("a\tb", "content")


def test_split_items_on_fullwidth_semicolon_and_newlines():
    assert split_items(" a ；b\n\n c；\n") == ["a", "b", "c"]
    assert split_items("一；二\n三") == ["一", "二", "三"]
    assert split_items("ascii; stays") == ["ascii; stays"]


def test_item_key_ignores_case_and_whitespace_runs():
    assert item_key("  Prefers   UV ") == item_key("prefers uv")
    assert item_key("使用 uv") != item_key("使用uv")


# --- add and delete -------------------------------------------------------------------


def test_plan_add_appends_an_entry_dated_today():
    lines, r = plan_add(parse(SAMPLE), "likes 简体中文；short answers\nno emojis", "sess-9", DAY)
    assert lines is not None and lines[-1] == (
        "2025-03-14|sess-9|likes 简体中文；short answers；no emojis")
    assert lines[:6] == split_lines(SAMPLE)
    assert (r.line, r.total, r.duplicate) == (7, 4, False)


def test_plan_add_to_a_file_without_final_newline():
    lines, r = plan_add(parse("2025-01-01|m|a"), "b", "m", DAY)
    assert format_lines(lines or []) == "2025-01-01|m|a\n2025-03-14|m|b\n" and r.line == 2


def test_plan_add_duplicate_returns_the_existing_line():
    lines, r = plan_add(parse(SAMPLE), "  部署在 fly.io ", "manual", DAY)
    assert lines is None and r.duplicate and r.line == 5 and r.total == 3
    assert r.duplicates == ("部署在 fly.io",)


def test_plan_add_keeps_only_the_new_items():
    lines, r = plan_add(parse(SAMPLE), "TABS ARE BANNED；new thing；new thing", "m", DAY)
    assert lines is not None and lines[-1] == "2025-03-14|m|new thing"
    assert r.added == ("new thing",) and r.duplicates == ("TABS ARE BANNED", "new thing")
    assert not r.duplicate


@pytest.mark.parametrize(("content", "source", "field", "msg"), [
    ("", "m", "content", "no items"),
    (" ；\n ；", "m", "content", "no items"),
    ("x" * 2001, "m", "content", "2000"),
    ("bell \x07", "m", "content", "control"),
    ("x", "", "source", "empty"),
    ("x", "   ", "source", "empty"),
    ("x", "a|b", "source", "'|'"),
    ("x", "a\nb", "source", "control"),
    ("x", "s" * 201, "source", "200"),
])
def test_plan_add_rejects_bad_input_naming_the_field(content, source, field, msg):
    with pytest.raises(BadRequestError) as ei:
        plan_add(parse(SAMPLE), content, source, DAY)
    assert ei.value.field == field and msg in ei.value.message


def test_plan_add_crlf_content_is_split_into_items():
    lines, _ = plan_add(parse(""), "a\r\nb", "m", DAY)
    assert lines == ["2025-03-14|m|a；b"]


def test_plan_add_refuses_beyond_the_bound_and_drops_nothing():
    full = parse("".join(f"2025-01-01|m|item {i}\n" for i in range(3)))
    with pytest.raises(MemoryFullError) as ei:
        plan_add(full, "one more", "m", DAY, max_entries=3)
    assert ei.value.status == 409 and "limit is 3" in ei.value.message
    # a duplicate is still answered when full: nothing would be added
    assert plan_add(full, "item 1", "m", DAY, max_entries=3)[1].duplicate


def test_plan_add_refuses_beyond_the_byte_bound():
    with pytest.raises(MemoryFullError, match="byte limit"):
        plan_add(parse(SAMPLE), "x" * 100, "m", DAY, max_bytes=len(SAMPLE.encode()) + 50)


def test_plan_delete_removes_only_entry_lines():
    assert plan_delete(parse(SAMPLE), [5, 3, 5]) == [
        "# Long-term memory", "", "Some prose the user typed | with a pipe.",
        "2025-02-10|sess-42|the API lives in memoryd/server"]


@pytest.mark.parametrize(("lines", "msg"), [([], "at least one"), ([0], "line 0 out of range"),
                                            ([7, 3], "line 7 out of range"),
                                            ([1, 3, 4], "lines 1, 4 not an entry")])
def test_plan_delete_rejects_non_entries_and_out_of_range(lines, msg):
    with pytest.raises(BadRequestError) as ei:
        plan_delete(parse(SAMPLE), lines)
    assert ei.value.field == "lines" and msg in ei.value.message


# --- reading --------------------------------------------------------------------------


def test_search_substring_case_insensitive_and_cjk():
    doc = parse(SAMPLE)
    assert [e.line for e in search(doc, ["postgresql"]).results] == [5]
    assert [e.line for e in search(doc, ["部署"]).results] == [5]
    assert [e.line for e in search(doc, ["CLAUDE-code"]).results] == [5]  # the source too


def test_search_or_ranks_by_hits_then_newest_and_and_needs_all():
    doc = parse(SAMPLE)
    r = search(doc, ["uv", "tabs", "api"], "or")
    assert [e.line for e in r.results] == [3, 6] and r.message == "2 matches, showing 2"
    assert [e.line for e in search(doc, ["uv", "tabs"], "and").results] == [3]
    assert search(doc, ["uv", "fly.io"], "and").total == 0


def test_search_no_match_says_so_and_returns_nothing():
    r = search(parse(SAMPLE), ["kubernetes"])
    assert r.total == 0 and r.results == () and r.message == "0 matches, showing 0"
    assert search(parse(SAMPLE), ["  "]).results == ()


def test_search_max_results_caps_shown_not_total():
    doc = parse("".join(f"2025-01-{i:02d}|m|note {i}\n" for i in range(1, 21)))
    r = search(doc, ["note"], max_results=5)
    assert r.total == 20 and len(r.results) == 5 and r.results[0].date == "2025-01-20"
    assert r.message == "20 matches, showing 5"


def test_stats_counts_per_source_and_dates():
    assert stats(parse(SAMPLE), 200) == {
        "total": 3, "limit": 200, "per_source": {"claude-code": 1, "manual": 1, "sess-42": 1},
        "first_date": "2025-01-02", "last_date": "2025-02-10", "invalid_lines": 0}
    assert stats(parse(""))["first_date"] is None


# --- the file -------------------------------------------------------------------------


@pytest.fixture
def path(tmp_path):
    return tmp_path / "data" / "memory" / "MEMORY.md"


@pytest.fixture
def bus():
    return EventBus()


def mf(path, bus=None, **kw):
    kw.setdefault("poll_interval", 0)
    return MemoryFile(path, events=bus, today=lambda: DAY, **kw)


def test_from_paths_is_in_the_memory_dir(tmp_path):
    m = MemoryFile.from_paths(resolve_paths(tmp_path))
    assert m.path == tmp_path / "data" / "memory" / "MEMORY.md"


async def test_missing_file_is_empty_memory(path):
    m = mf(path)
    doc = await m.document()
    assert doc.entries == () and await m.recent(10) == []
    assert (await m.stats())["total"] == 0
    assert not path.exists() and not path.parent.exists()  # reading creates nothing


async def test_add_creates_dir_0700_and_file_0600(path):
    m = mf(path)
    r = await m.add("第一条记忆", "manual")
    assert (r.line, r.total) == (1, 1)
    assert path.read_text("utf-8") == "2025-03-14|manual|第一条记忆\n"
    assert path.stat().st_mode & 0o777 == 0o600
    assert path.parent.stat().st_mode & 0o777 == 0o700
    assert [p.name for p in path.parent.iterdir() if p.name.endswith(".tmp")] == []


async def test_write_tightens_existing_permissions(path):
    path.parent.mkdir(parents=True, mode=0o755)
    path.parent.chmod(0o755)
    path.write_text("# mine\n")
    path.chmod(0o644)
    await mf(path).add("x", "m")
    assert path.stat().st_mode & 0o777 == 0o600
    assert path.parent.stat().st_mode & 0o777 == 0o700
    assert path.read_text() == "# mine\n2025-03-14|m|x\n"


async def test_write_leaves_a_shared_folder_its_mode(path):
    path.parent.mkdir(parents=True)
    path.parent.chmod(0o1777)  # sticky and world-writable: /tmp's kind, everyone's
    await mf(path).add("x", "m")
    assert path.stat().st_mode & 0o777 == 0o600
    assert path.parent.stat().st_mode & 0o7777 == 0o1777


async def test_write_is_a_rename_so_readers_never_see_half_a_file(path):
    m = mf(path)
    await m.add("a", "m")
    ino = path.stat().st_ino
    await m.add("b", "m")
    assert path.stat().st_ino != ino


async def test_datetime_clock_is_reduced_to_its_date(path):
    m = MemoryFile(path, today=lambda: datetime(2025, 5, 6, 23, 59), poll_interval=0)
    await m.add("x", "m")
    assert path.read_text() == "2025-05-06|m|x\n"


async def test_external_edit_is_kept_by_the_next_add(path, bus):
    m = mf(path, bus)
    await m.add("from the api", "m")
    # a person edits in an editor
    text = path.read_text()
    path.write_text(text.replace("from the api", "FROM THE API") + "# my note\n")
    async with bus.subscribe() as q:
        await m.add("second", "m")
        events = [q.get_nowait() for _ in range(q.qsize())]
    assert path.read_text() == ("2025-03-14|m|FROM THE API\n# my note\n"
                                "2025-03-14|m|second\n")
    assert [(e["event"], e["origin"]) for e in events] == [
        ("memory_changed", "external"), ("memory_changed", "api")]
    assert events[1]["op"] == "add" and events[1]["total"] == 2


async def test_same_size_in_place_edit_is_seen_on_read(path, bus):
    m = mf(path, bus)
    await m.add("aaaa", "m")
    await m.document()
    with open(path, "r+b") as f:  # in place: same inode, same size
        f.seek(len("2025-03-14|m|"))
        f.write(b"bbbb")
    async with bus.subscribe() as q:
        doc = await m.document()
        assert q.get_nowait()["origin"] == "external"
    assert doc.entries[0].items == ("bbbb",)


async def test_replaced_file_new_inode_is_seen(path):
    m = mf(path)
    await m.add("old", "m")
    await m.document()
    tmp = path.with_name("x")
    tmp.write_text("2024-01-01|vim|new\n")
    os.replace(tmp, path)
    assert (await m.document()).entries[0].items == ("new",)


async def test_deleted_file_reads_as_empty(path):
    m = mf(path)
    await m.add("x", "m")
    path.unlink()
    assert (await m.document()).entries == ()


async def test_own_writes_are_not_reported_as_external(path, bus):
    m = mf(path, bus)
    async with bus.subscribe() as q:
        await m.add("a", "m")
        await m.add("b", "m")
        await m.document()
        await m.delete([1])
        await m.document()
        origins = [q.get_nowait()["origin"] for _ in range(q.qsize())]
    assert origins == ["api", "api", "api"]


async def test_duplicate_and_noop_replace_write_nothing(path, bus):
    m = mf(path, bus)
    await m.add("a", "m")
    mtime = path.stat().st_mtime_ns
    async with bus.subscribe() as q:
        assert (await m.add("A", "other")).duplicate
        await m.replace(path.read_text())
        assert q.empty()
    assert path.stat().st_mtime_ns == mtime


async def test_concurrent_adds_lose_nothing(path):
    m = mf(path)
    results = await asyncio.gather(*(m.add(f"item {i}", "m") for i in range(30)))
    assert sorted(r.line for r in results) == list(range(1, 31))
    doc = parse(path.read_text())
    assert sorted(e.items[0] for e in doc.entries) == sorted(f"item {i}" for i in range(30))


async def test_two_memory_files_on_one_path_lose_nothing(path):
    # two processes (here: two instances, each with its own asyncio lock) share the flock
    a, b = mf(path), mf(path)
    await asyncio.gather(*(x.add(f"{n} {i}", "m") for i in range(15)
                           for n, x in (("a", a), ("b", b))))
    assert len(parse(path.read_text()).entries) == 30


async def test_flock_held_by_another_process_times_out(path):
    m = mf(path, lock_timeout=0.1)
    await m.add("a", "m")
    fd = os.open(m.lock_path, os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        with pytest.raises(MemoryLockedError, match="another process"):
            await m.add("b", "m")
    finally:
        os.close(fd)
    assert (await m.add("b", "m")).line == 2
    assert m.lock_path.stat().st_mode & 0o777 == 0o600


async def test_flock_released_in_time_lets_the_write_through(path):
    m = mf(path, lock_timeout=5)
    await m.add("a", "m")
    fd = os.open(m.lock_path, os.O_RDWR)
    fcntl.flock(fd, fcntl.LOCK_EX)
    task = asyncio.create_task(m.add("b", "m"))
    await asyncio.sleep(0.1)
    assert not task.done()
    os.close(fd)
    assert (await task).line == 2


async def test_cancelled_write_holds_the_lock_until_its_thread_ends(path):
    m = mf(path, lock_timeout=5)
    await m.add("a", "m")
    fd = os.open(m.lock_path, os.O_RDWR)
    fcntl.flock(fd, fcntl.LOCK_EX)
    first = asyncio.create_task(m.add("b", "m"))
    await asyncio.sleep(0.05)
    first.cancel()
    second = asyncio.create_task(m.add("c", "m"))
    await asyncio.sleep(0.05)
    assert not first.done() and not second.done()  # the thread still owns the file
    os.close(fd)
    with pytest.raises(asyncio.CancelledError):
        await first
    assert (await second).line == 3
    assert path.read_text() == "2025-03-14|m|a\n2025-03-14|m|b\n2025-03-14|m|c\n"


async def test_start_with_a_broken_file_warns_and_serves_errors(path, caplog):
    path.mkdir(parents=True)
    m = mf(path, poll_interval=0.02)
    await m.start()
    try:
        assert "cannot read" in caplog.text
        with pytest.raises(MemoryIOError):
            await m.document()
    finally:
        await m.stop()


async def test_replace_validates_and_versions(path):
    m = mf(path)
    snap = await m.replace("# notes\n2025-01-01|manual|x\n")
    assert len(snap.doc.entries) == 1
    with pytest.raises(BadRequestError, match="line 2"):
        await m.replace("ok\n2025-01-01|manual|\n")
    path.write_text(path.read_text() + "edited\n")
    with pytest.raises(VersionConflictError) as ei:
        await m.replace("overwrite", version=snap.version)
    assert ei.value.field == "version" and ei.value.status == 409
    assert path.read_text().endswith("edited\n")
    current = await m.snapshot()
    assert (await m.replace("", version=current.version)).raw == b""


async def test_delete_with_stale_version_refuses(path):
    m = mf(path)
    await m.add("a", "m")
    await m.add("b", "m")
    snap = await m.snapshot()
    path.write_text("# inserted on top\n" + path.read_text())  # line numbers shift
    with pytest.raises(VersionConflictError):
        await m.delete([1], version=snap.version)
    with pytest.raises(BadRequestError, match="not an entry"):
        await m.delete([1])
    after = await m.delete([2])
    assert path.read_text() == "# inserted on top\n2025-03-14|m|b\n"
    assert len(after.doc.entries) == 1


async def test_memory_full_refuses_with_the_limit(path):
    m = mf(path, max_entries=2)
    await m.add("a", "m")
    await m.add("b", "m")
    with pytest.raises(MemoryFullError) as ei:
        await m.add("c", "m")
    assert ei.value.code == "memory_full" and "limit is 2" in ei.value.message
    assert len(parse(path.read_text()).entries) == 2


async def test_symlinked_memory_file_stays_a_symlink(path, tmp_path):
    real = tmp_path / "dotfiles" / "MEMORY.md"
    real.parent.mkdir()
    real.write_text("# kept in git\n")
    path.parent.mkdir(parents=True)
    path.symlink_to(real)
    await mf(path).add("x", "m")
    assert path.is_symlink() and real.read_text() == "# kept in git\n2025-03-14|m|x\n"


async def test_not_utf8_is_refused_for_edits_but_replace_recovers(path):
    path.parent.mkdir(parents=True)
    path.write_bytes("2025-01-01|m|中文\n".encode("gbk"))
    m = mf(path)
    with pytest.raises(MemoryUnreadableError, match="not valid UTF-8"):
        await m.document()
    with pytest.raises(MemoryUnreadableError):
        await m.add("x", "m")
    assert path.read_bytes() == "2025-01-01|m|中文\n".encode("gbk")
    await m.replace("2025-01-01|m|中文\n")
    assert (await m.document()).entries[0].items == ("中文",)


async def test_poller_publishes_external_edits_and_stops(path, bus):
    m = mf(path, bus, poll_interval=0.02)
    await m.add("a", "m")
    await m.start()
    try:
        async with bus.subscribe() as q:
            path.write_text(path.read_text() + "2025-03-15|vim|typed by hand\n")
            ev = await asyncio.wait_for(q.get(), 5)
        assert ev == {**ev, "event": "memory_changed", "origin": "external", "total": 2}
    finally:
        await m.stop()
    assert m._task is None
    await m.stop()  # idempotent


async def test_poller_survives_an_unreadable_file(path, bus, caplog):
    m = mf(path, bus, poll_interval=0.02)
    await m.start()
    try:
        path.mkdir(parents=True)  # a directory where the file should be: reads fail
        await wait_for(lambda: "cannot read" in caplog.text, timeout=5)
        await asyncio.sleep(0.1)  # several polls
        assert caplog.text.count("cannot read") == 1  # logged once, not every poll
        async with bus.subscribe() as q:
            path.rmdir()
            path.write_text("2025-01-01|m|back\n")
            ev = await asyncio.wait_for(q.get(), 5)
        assert ev["origin"] == "external" and ev["total"] == 1
        assert m._task is not None and not m._task.done()
    finally:
        await m.stop()


async def test_io_errors_are_memory_io_errors(path):
    path.parent.parent.mkdir(parents=True)
    path.parent.write_text("a file where the memory dir should be")
    m = mf(path)
    with pytest.raises(MemoryIOError, match="cannot"):
        await m.add("x", "m")


async def test_cas_retries_when_the_file_changes_while_planning(path):
    m = mf(path)
    await m.add("a", "m")
    edits = iter(["# edit 1\n"])

    def plan(s):
        nxt = next(edits, None)
        if nxt is not None:  # a person saves between our read and our write
            path.write_text(nxt + path.read_text())
        return format_lines([*s.doc.lines, "2025-03-14|m|z"]), None

    await m._mutate("add", plan)
    assert path.read_text() == "# edit 1\n2025-03-14|m|a\n2025-03-14|m|z\n"


async def test_cas_gives_up_if_the_file_never_settles(path):
    m = mf(path)
    await m.add("a", "m")
    n = 0

    def plan(s):
        nonlocal n
        n += 1
        path.write_text(f"# edit {n}\n")
        return "mine\n", None

    with pytest.raises(ConflictError, match="kept changing"):
        await m._mutate("add", plan)
    assert path.read_text() == "# edit 3\n"


def test_sep_is_fullwidth_semicolon():
    assert SEP == "\uff1b"


async def test_a_write_cut_short_by_kill_9_leaves_no_temp_file_after_the_next_start(tmp_path):
    """kill -9 between a write's temp file and its rename leaves `.MEMORY.md.*.tmp`; the
    next start removes it under the file lock (a live writer holds that lock while its temp
    exists). Other files' temps are theirs to clean."""
    d = tmp_path / "memory"
    d.mkdir()
    (d / "MEMORY.md").write_text("# Memory\n")
    cut = d / ".MEMORY.md.k9x2ab.tmp"
    cut.write_text("# Memory\n- half")
    other = d / ".2025-01-01.md.zz.tmp"
    other.write_text("x")
    m = MemoryFile(d / "MEMORY.md", poll_interval=0)
    await m.start()
    try:
        assert not cut.exists() and other.exists()
        assert (await m.snapshot()).raw == b"# Memory\n"
    finally:
        await m.stop()
