"""Test helper: one valid sample transcript per adapter, kinds of bad line, and a way
to ingest a file into a fresh store and see what came of it."""

from __future__ import annotations

import asyncio
import json
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path

from memoryd.ingest.ingestor import Ingestor
from memoryd.ingest.redact import Redactor
from memoryd.daemon.store_index import open_store

SAMPLE_LINES = 20


def _head(path: Path, n: int = SAMPLE_LINES) -> list[bytes]:
    with path.open("rb") as f:
        return [line.rstrip(b"\n") for _, line in zip(range(n), f, strict=False)]


def samples(fixtures: Path, tmp: Path) -> dict[str, tuple[str, list[bytes]]]:
    """agent -> (path under the root, the sample's lines)."""
    from tests.ingest.test_adapter_gemini_cli import write_jsonl_log

    gemini = tmp / "gemini.jsonl"
    write_jsonl_log(fixtures, gemini)
    generic = [json.dumps({"role": "user" if i % 2 == 0 else "assistant",
                           "content": f"message {i} 你好", "id": f"g{i}"}).encode()
               for i in range(8)]
    return {
        "claude-code": ("p/tiny.jsonl", _head(fixtures / "claude-code/tiny-conversation.jsonl")),
        "codex": ("2026/02/23/rollout-x.jsonl", _head(
            fixtures / "codex/2026/02/23/"
            "rollout-2026-02-23T13-19-38-019c8a70-dda7-7f33-98ea-f30553347322.jsonl")),
        "gemini-cli": ("chats/session-x.jsonl", _head(gemini)),
        "pi": ("--p--/s.jsonl", _head(fixtures / "pi/large-session.jsonl")),
        "openclaw": ("agents/main/sessions/1388a5a9-1d7b-4d24-abbf-594db52661bc.jsonl", _head(
            fixtures / "openclaw/agents/main/sessions/1388a5a9-1d7b-4d24-abbf-594db52661bc.jsonl")),
        "nanobot": ("ws/sessions/cli_direct.jsonl",
                    _head(fixtures / "nanobot/marmotworks/cli_direct.jsonl")),
        "generic": ("chat.jsonl", generic),
    }


def deep(n: int = 1000, opener: str = '{"a":') -> bytes:
    return (opener * n + "1" + ("}" if opener.startswith("{") else "]") * n).encode()


# the kinds of bad line the issue reproduced; each must be skipped and counted
BAD_LINES: dict[str, Callable[[], bytes]] = {
    "deep_nesting": deep,
    "deep_array": lambda: deep(5000, "["),
    "invalid_json": lambda: b'{"role": "user", "content": ',
    "binary": lambda: bytes(range(128, 256)) * 4,
    "nul_bytes": lambda: b"\x00" * 64,
    "nul_inside_object": lambda: b'{"role":"user",\x00"content":"x"}',
    "invalid_utf8": lambda: b'{"role": "user", "content": "\xff\xfe caf\xe9"}',
    "top_level_string": lambda: b'"just a string"',
    "top_level_array": lambda: b'[{"role": "user", "content": "in an array"}]',
    "top_level_number": lambda: b"42",
    "top_level_null": lambda: b"null",
    "wrong_field_types": lambda: b'{"role": 7, "content": {"x": 1}, "timestamp": []}',
    "wrong_content_type": lambda: b'{"role": "user", "content": 12345, "type": 5}',
    "junk_6mb": lambda: b"\x01junk" * ((6 << 20) // 5),
}


def with_bad(lines: list[bytes], bad: bytes, position: int) -> bytes:
    out = [*lines[:position], bad, *lines[position:]]
    return b"".join(line + b"\n" for line in out)


def ingest_once(data: bytes, rel: str, agent: str) -> tuple[set[tuple[str, str]], int]:
    """Ingest `data` as `rel` under a fresh root and store: (units, bad lines counted)."""
    tmp = Path(tempfile.mkdtemp(prefix="mdbad"))
    try:
        root = tmp / "src"
        path = root / rel
        path.parent.mkdir(parents=True)
        path.write_bytes(data)
        return asyncio.run(_ingest(tmp / "memoryd.db", path, root, agent))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


async def _ingest(db: Path, path: Path, root: Path,
                  agent: str) -> tuple[set[tuple[str, str]], int]:
    store = await open_store(db)
    try:
        ing = Ingestor(store, Redactor(), max_line_bytes=16 << 20)
        await ing.ingest_file(path, root, agent)

        def read(c):  # type: ignore[no-untyped-def]
            units = {(r[0], r[1]) for r in c.execute("SELECT record_id, content FROM units")}
            bad = c.execute("SELECT coalesce(sum(bad_lines), 0) FROM files").fetchone()[0]
            return units, bad

        return await store.read(read)
    finally:
        await store.close()
