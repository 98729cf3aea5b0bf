import io

from memoryd.ingest.cursor import complete_lines, first_line


def lines(data: bytes, start=0, max_line=100):
    return [(x.start, x.end, x.data) for x in complete_lines(io.BytesIO(data), start, max_line)]


def test_partial_last_line_waits_for_newline():
    assert lines(b'{"a":1}\n{"b":') == [(0, 8, b'{"a":1}')]
    assert lines(b'{"a":1}\n{"b":2}\n', start=8) == [(8, 16, b'{"b":2}')]


def test_oversize_line_is_reported_not_held():
    big = b"x" * 5000
    assert lines(b"a\n" + big + b"\nb\n") == [(0, 2, b"a"), (2, 5003, None), (5003, 5005, b"b")]


def test_oversize_partial_line_is_not_consumed():
    assert lines(b"a\n" + b"x" * 5000) == [(0, 2, b"a")]


def test_first_line():
    assert first_line(io.BytesIO(b"one\ntwo")) == (b"one", True)
    assert first_line(io.BytesIO(b"one")) == (b"one", False)
