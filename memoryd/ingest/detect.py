"""Finding the lines a file's dialect can be recognised by.

A transcript's first line may be junk (a torn write, binary, a line too deep or too
large to decode): detection then looks at the first lines that decode to a JSON
object, so one bad line never hides the transcript behind it.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import BinaryIO

from memoryd.ingest.cursor import complete_lines

DETECT_LINES = 64  # complete lines looked at
DETECT_BYTES = 32 << 20  # and no further into the file than this


def first_objects(f: BinaryIO, max_line: int, limit: int = 3) -> Iterator[bytes]:
    """Up to `limit` of the first complete lines that are JSON objects."""
    found = 0
    for n, line in enumerate(complete_lines(f, 0, max_line)):
        if n >= DETECT_LINES or line.start >= DETECT_BYTES:
            return
        if line.data is None or not line.data.strip():
            continue
        try:
            obj = json.loads(line.data)
        except (ValueError, RecursionError):
            continue
        if isinstance(obj, dict):
            yield line.data
            found += 1
            if found >= limit:
                return
