"""Issue 8 item 1: one bad line never drops a transcript. Every kind of bad line, at
every position (the first line included), in every adapter's dialect, is skipped and
counted, and every good line around it is ingested."""

from __future__ import annotations

import functools
import json
import logging
import tempfile
from pathlib import Path

import pytest

from memoryd.ingest.ingestor import Ingestor
from memoryd.ingest.redact import Redactor
from memoryd.daemon.store_index import open_store
from tests.ingest.bad_lines import BAD_LINES, deep, ingest_once, samples, with_bad

AGENTS = ("claude-code", "codex", "gemini-cli", "pi", "openclaw", "nanobot", "generic")


@functools.cache
def _corpus() -> dict[str, tuple[str, list[bytes]]]:
    from tests.conftest import FIXTURES

    return samples(FIXTURES, Path(tempfile.mkdtemp(prefix="mdsamples")))


@functools.cache
def _baseline() -> dict[str, set[tuple[str, str]]]:
    out = {}
    for agent, (rel, lines) in _corpus().items():
        units, bad = ingest_once(b"".join(x + b"\n" for x in lines), rel, agent)
        assert units and bad == 0, agent
        out[agent] = units
    return out


@pytest.fixture
def corpus():
    return _corpus()


@pytest.fixture
def baseline():
    return _baseline()


@pytest.mark.parametrize("kind", sorted(BAD_LINES))
def test_issue_8_bad_first_line_under_explicit_source_keeps_the_file(kind, corpus, baseline):
    # 11 of 14 kinds of bad first line made the file "not a transcript" even under
    # --source generic=DIR; the tests/reliability matrix covers every position and source
    rel, lines = corpus["generic"]
    units, bad = ingest_once(with_bad(lines, BAD_LINES[kind](), 0), rel, "generic")
    assert units == baseline["generic"]
    assert bad == 1


@pytest.mark.parametrize("agent", AGENTS)
def test_issue_8_bad_first_line_keeps_every_adapters_transcript(agent, corpus, baseline):
    rel, lines = corpus[agent]
    units, bad = ingest_once(with_bad(lines, BAD_LINES["invalid_json"](), 0), rel, "auto")
    assert (units, bad) == (baseline[agent], 1)


async def test_issue_8_deep_nesting_line_does_not_fail_the_file(tmp_path, caplog):
    store = await open_store(tmp_path / "memoryd.db")
    try:
        ing = Ingestor(store, Redactor(), max_line_bytes=1 << 20)
        root = tmp_path / "src"
        root.mkdir()
        f = root / "s.jsonl"
        good = [json.dumps({"role": "user", "content": f"m{i}", "id": str(i)}).encode()
                for i in range(3)]
        f.write_bytes(with_bad(good, deep(), 1))
        with caplog.at_level(logging.WARNING):
            assert await ing.ingest_file(f, root, "generic") == 3
        assert f"{f}:2: skipped bad line: JSON nested too deeply" in caplog.text
        assert ing.stats.errors == 0 and not ing.failures.failing
        assert ing.failures.bad_lines[str(f)].line_no == 2
    finally:
        await store.close()


def test_a_lines_decoding_and_shape_check_say_what_json_loads_and_the_field_order_say():
    """The ingestor's own line decoding (UTF-8 without json.loads' sniffing, the C
    scanner for a line that is one value) and the shape check's one-intersection fast
    path give the same objects and messages."""
    import json

    from memoryd.ingest.adapters.base import _FIELD_TYPES, shape_error
    from memoryd.ingest.ingestor import _loads

    lines = [b'{"role": "user", "content": "hi"}', '{"a": "中文 ✓"}'.encode(),
             b'\xef\xbb\xbf{"a": 1}', '{"a": 1}'.encode("utf-16"), '{"a": 1}'.encode("utf-32"),
             '{"a": 1}'.encode("utf-16-le"), b'"\\ud800"', b'{"a": "\xff"}', b"{bad", b"\xff\xfe",
             b"[1]", b"1", b"", b"\x00",
             # the C scanner's fast path and what it leaves to the decoder: blanks around
             # a value, extra data, a cut line, JSON's non-standard constants
             b'{"a": 1}\r', b' {"a": 1}', b'{"a": 1} ', b'{"a": 1} x', b'{"a": 1}{"b": 2}',
             b'{"a": "b', b'{"a": 1,}', b'{"a": NaN, "b": -Infinity}', b"  ", b"]"]
    for data in lines:
        want = got = None
        try:
            want = ("ok", json.loads(data))
        except ValueError as e:
            want = (type(e).__name__, str(e))
        try:
            got = ("ok", _loads(data))
        except ValueError as e:
            got = (type(e).__name__, str(e))
        assert got == want, data
    # two wrong fields: the message names the first in _FIELD_TYPES' order, as the walk did
    keys = list(_FIELD_TYPES)
    for a in keys:
        for b in keys:
            if a != b:
                obj = {b: True, "x": 1, a: 12.5 if a != "timestamp" else [1]}
                first = next(k for k in keys if k in (a, b))
                assert shape_error(obj) is not None and repr(first) in shape_error(obj)
    assert shape_error({"role": "user", "content": [], "timestamp": 3, "x": {}}) is None
