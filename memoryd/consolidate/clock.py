"""Time for consolidation and retention: an injectable clock and the user's local days.

A day is a calendar date in the configured zone (zoneinfo), so its bounds are computed
from local midnights: a DST day is 23 or 25 hours long, never cut at a fixed 24 h.
"""

from __future__ import annotations

import datetime as dt
import time
import zoneinfo
from collections.abc import Callable

Clock = Callable[[], float]


class SettableClock:
    """A clock tests and benchmarks move by hand; `None` follows the real time."""

    def __init__(self, now: float | None = None) -> None:
        self.now = now

    def __call__(self) -> float:
        return time.time() if self.now is None else self.now

    def set(self, when: float | dt.datetime) -> None:
        self.now = when.timestamp() if isinstance(when, dt.datetime) else float(when)

    def advance(self, seconds: float) -> None:
        self.now = self() + seconds


def zone(name: str) -> dt.tzinfo:
    """The named IANA zone, or the system's local zone for ""."""
    if name:
        return zoneinfo.ZoneInfo(name)
    local = dt.datetime.now().astimezone().tzinfo
    assert local is not None
    return local


def local_day(ts: float, tz: dt.tzinfo) -> dt.date:
    return dt.datetime.fromtimestamp(ts, tz).date()


def day_bounds(day: dt.date, tz: dt.tzinfo) -> tuple[float, float]:
    """[start, end) of a local day as timestamps (DST-safe: local midnight to midnight)."""
    start = dt.datetime.combine(day, dt.time(), tzinfo=tz)
    end = dt.datetime.combine(day + dt.timedelta(days=1), dt.time(), tzinfo=tz)
    return _fold_safe(start), _fold_safe(end)


def _fold_safe(d: dt.datetime) -> float:
    # a midnight that does not exist (a DST jump at 00:00) resolves forward, as zoneinfo does
    return d.timestamp()


def parse_day(text: str, field: str = "date") -> dt.date:
    from memoryd.errors import BadRequestError

    try:
        return dt.date.fromisoformat(text)
    except (TypeError, ValueError):
        raise BadRequestError(f"{field}: expected a date YYYY-MM-DD, got {text!r}",
                              field=field) from None
