"""Finding the lines a file's dialect can be recognised by.

A transcript's first line may be junk (a torn write, binary, a line too deep or too
large to decode): detection then looks at the lines that decode to a JSON object, so bad
lines never hide the transcript behind them, however many there are. A look covers at
most `DETECT_BYTES` and says where it stopped: a file found to be no transcript is looked
at again when it grows, from there on, so lines appended after a junk head (or after a
head longer than one look) are found and the file is read from its top.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import BinaryIO, TypeVar

from memoryd.ingest.cursor import complete_lines

DETECT_BYTES = 32 << 20  # one look goes no further than this past where it began
AUTO_OBJECTS = 3  # auto-detection: the JSON-object lines one look asks about

T = TypeVar("T")


def look(f: BinaryIO, max_line: int, claim: Callable[[bytes], T | None], *, start: int = 0,
         objects: int | None = AUTO_OBJECTS) -> tuple[T | None, int]:
    """What `claim` answers for the first JSON-object line from `start` on that it claims
    (asking about at most `objects` such lines; None: all of them in the window), and the
    end of the last complete line looked at (a later look starts there)."""
    end = start
    for line in complete_lines(f, start, max_line):
        if line.start - start >= DETECT_BYTES:
            break
        end = line.end
        data = line.data
        if data is None or not data.lstrip().startswith(b"{"):
            continue
        try:
            obj = json.loads(data)
        except (ValueError, RecursionError):
            continue
        if not isinstance(obj, dict):
            continue
        if (got := claim(data)) is not None:
            return got, end
        if objects is not None:
            objects -= 1
            if objects <= 0:
                break
    return None, end
