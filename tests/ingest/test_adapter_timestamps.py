"""timestamps.to_unix: every time shape agents write, and nothing raises."""

from __future__ import annotations

import time

import pytest

from memoryd.ingest.adapters.timestamps import to_unix


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("2026-01-07T20:58:27.907Z", 1767819507.907),
        ("2026-01-07T20:58:27.907+00:00", 1767819507.907),
        ("2026-01-07T23:58:27.907+03:00", 1767819507.907),
        ("2026-01-07T20:58:27Z", 1767819507.0),
        (1767819507907, 1767819507.907),  # Unix ms (pi, OpenClaw)
        (1767819507.5, 1767819507.5),  # Unix seconds
        ("1767819507907", 1767819507.907),
    ],
)
def test_to_unix_aware_and_numeric(value, expected):
    assert to_unix(value) == expected


@pytest.mark.parametrize(
    "value",
    [
        None,
        "",
        "   ",
        "yesterday",
        "2026-13-45T99:00:00Z",
        True,
        [],
        {},
        float("nan"),
        float("inf"),
        -5,
        "9" * 400,
    ],
)
def test_to_unix_bad_input_is_none(value):
    assert to_unix(value) is None


def test_to_unix_naive_is_local_time(monkeypatch):
    try:
        with monkeypatch.context() as m:
            m.setenv("TZ", "Asia/Shanghai")
            time.tzset()
            shanghai = to_unix("2026-02-21T14:59:05.625104")
            m.setenv("TZ", "UTC")
            time.tzset()
            utc = to_unix("2026-02-21T14:59:05.625104")
    finally:
        time.tzset()
    assert utc == 1771685945.625104
    assert shanghai == utc - 8 * 3600
