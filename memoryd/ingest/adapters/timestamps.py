"""Timestamps as agents write them -> Unix seconds (UTC) as a float.

Shapes seen in transcripts (see docs/formats.md, "Cross-cutting rules" 5):
ISO-8601 with `Z` or an offset (Claude, Codex, Gemini, pi, OpenClaw), naive ISO-8601 in the
host's local time (nanobot's `datetime.now().isoformat()`), and Unix milliseconds (pi and
OpenClaw message bodies). Anything else gives None; nothing here raises.
"""

from __future__ import annotations

import math
from datetime import datetime

# Below this a number is read as seconds, above it as milliseconds: 1e11 s is the year 5138,
# while 1e11 ms is March 1973, so no plausible transcript time is ambiguous.
_MS_THRESHOLD = 1e11


def to_unix(value: object) -> float | None:
    """Unix seconds UTC for an ISO-8601 string, Unix seconds or Unix milliseconds.

    A naive ISO string (no offset) is taken as the host's local time.
    """
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return _from_number(float(value))
    if isinstance(value, str):
        s = value.strip()
        if not s:
            return None
        if s.lstrip("-").replace(".", "", 1).isdigit():
            return _from_number(float(s))
        return _from_iso(s)
    return None


def _from_number(x: float) -> float | None:
    if not math.isfinite(x) or x < 0:
        return None
    return x / 1000.0 if x >= _MS_THRESHOLD else x


def _from_iso(s: str) -> float | None:
    try:
        dt = datetime.fromisoformat(s)
        # A naive datetime's timestamp() uses the local zone (mktime), as wanted.
        return dt.timestamp()
    except (ValueError, OverflowError, OSError):
        return None
