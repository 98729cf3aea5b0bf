"""Reading a transcript from where we left off.

Only complete lines are consumed: the offset never moves past the last `\\n`, so a
line still being written waits for its newline. A fingerprint of the consumed prefix
(its first and last 4 KiB) tells an append from a rewrite: nanobot replaces the whole
file (new inode), pi and Gemini rewrite in place, a truncation shrinks the file. Any
of those restarts the file from byte 0; record ids de-duplicate what was already stored.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterator
from dataclasses import dataclass
from typing import BinaryIO

from memoryd.store.files import Cursor

WINDOW = 4096
CHUNK = 1 << 20


@dataclass(frozen=True, slots=True)
class Line:
    start: int  # byte offset of the line
    end: int  # byte offset just past its newline
    data: bytes | None  # None: longer than the limit (skipped, counted)


def window_hash(f: BinaryIO, start: int, end: int) -> str:
    f.seek(start)
    return hashlib.blake2b(f.read(end - start), digest_size=8).hexdigest()


def fingerprint(f: BinaryIO, offset: int) -> tuple[str, str]:
    """(head, tail) hashes of the consumed prefix [0, offset)."""
    head = window_hash(f, 0, min(WINDOW, offset))
    tail = window_hash(f, max(0, offset - WINDOW), offset)
    return head, tail


def is_continuation(f: BinaryIO, st: os.stat_result, c: Cursor) -> bool:
    """True when the file is the one we read, grown or unchanged; False when it was
    replaced, truncated or rewritten under the offset."""
    if c.offset == 0:
        return True
    if c.inode is not None and st.st_ino != c.inode:
        return False
    if st.st_size < c.offset:
        return False
    return fingerprint(f, c.offset) == (c.head_hash, c.tail_hash)


def complete_lines(f: BinaryIO, start: int, max_line: int) -> Iterator[Line]:
    """Complete lines from `start`; the caller stops whenever its batch is full. A line
    longer than `max_line` is yielded with data=None without being held in memory."""
    f.seek(start)
    pos = start  # file offset of buf[0]
    buf = b""
    skipping: int | None = None  # start offset of an oversize line being dropped
    while chunk := f.read(CHUNK):
        buf += chunk
        begin = 0
        while (nl := buf.find(b"\n", begin)) != -1:
            if skipping is not None:
                yield Line(skipping, pos + nl + 1, None)
                skipping = None
            elif nl - begin > max_line:
                yield Line(pos + begin, pos + nl + 1, None)
            else:
                yield Line(pos + begin, pos + nl + 1, buf[begin:nl])
            begin = nl + 1
        if skipping is None and len(buf) - begin > max_line:
            skipping = pos + begin
        if skipping is not None:
            pos += len(buf)
            buf = b""
        else:
            pos += begin
            buf = buf[begin:]


def first_line(f: BinaryIO, limit: int = CHUNK) -> tuple[bytes, bool]:
    """The first line (up to `limit` bytes) and whether it is complete."""
    f.seek(0)
    head = f.read(limit)
    nl = head.find(b"\n")
    if nl == -1:
        return head, False
    return head[:nl], True
