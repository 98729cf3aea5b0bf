"""What the tantivy index holds: one document per unit, no stored text.

- `body` and `one_liner`: the unit's text as `memoryd.index.text.index_text` renders it
  (CJK runs as bigrams, camelCase parts appended), analyzed by `ANALYZER`: the simple
  tokenizer (runs of letters and digits, as FTS5's unicode61 did), lowercase, ASCII
  folding, the English stemmer. Term frequencies but no positions: positions were half
  the index (5.6 of 12.1 MB for 30k units), and the only phrases a query makes are a CJK
  word's bigrams (in OR mode already split into single bigrams) and words like "don't",
  which now match as all of their tokens (`memoryd.index.query.term_clause`).
- `unit_id`, `session_pk`: indexed fast fields, for term filters (a session set, a set of
  units to delete) inside the index and for mapping a hit back to its row in SQLite.
- `seq`, `ts`: fast fields only, for range filters (the asking session's recent tail, a
  time range): tantivy runs a range query on a fast field's column whether or not the
  field is indexed too, so their terms were never read (schema 3 indexed them: 1.6 of
  37.5 MB at 200k units, bench/README.md).
- `speaker`, `dup`, `chars`: fast fields the reranking reads straight from the index, so
  ranking a hundred candidates costs no SQLite round trip: whose message a unit is
  (`SPEAKER_CODES`), a 64-bit hash of its normalized head (near-duplicate collapse; 0 for
  none) and its length. Session attributes (agent, project, session id) are
  resolved to a set of `session_pk` at query time: a session's project can change after
  its units were indexed, its pk cannot.

Bump `SCHEMA_VERSION` whenever this or the analyzer changes: an index with another
version is rebuilt from SQLite in the background.
"""

from __future__ import annotations

from typing import Any

import tantivy

SCHEMA_VERSION = 4
ANALYZER = "memoryd"
MAX_TOKEN_CHARS = 80  # longer "words" are hashes, base64 or minified code


def build_schema() -> tantivy.Schema:
    sb = tantivy.SchemaBuilder()
    sb.add_text_field("body", tokenizer_name=ANALYZER, index_option="freq")
    sb.add_text_field("one_liner", tokenizer_name=ANALYZER, index_option="freq")
    sb.add_unsigned_field("unit_id", indexed=True, fast=True)
    sb.add_unsigned_field("session_pk", indexed=True, fast=True)
    sb.add_unsigned_field("seq", fast=True)
    sb.add_float_field("ts", fast=True)
    sb.add_unsigned_field("speaker", fast=True)
    sb.add_unsigned_field("dup", fast=True)
    sb.add_unsigned_field("chars", fast=True)
    return sb.build()


def build_analyzer() -> tantivy.TextAnalyzer:
    return (tantivy.TextAnalyzerBuilder(tantivy.Tokenizer.simple())
            .filter(tantivy.Filter.remove_long(MAX_TOKEN_CHARS))
            .filter(tantivy.Filter.lowercase())
            .filter(tantivy.Filter.ascii_fold())
            .filter(tantivy.Filter.stemmer("english"))
            .build())


SPEAKER_CODES = {"user": 1, "assistant": 2}
"""`speaker` of a message unit by its role; any other unit is 0."""


def speaker_code(role: str | None, kind: str | None) -> int:
    return SPEAKER_CODES.get(role or "", 0) if kind == "message" else 0


def document(row: Any, body: str, one_liner: str, *, speaker: int = 0, dup: int = 0,
             chars: int = 0) -> tantivy.Document:
    """The document of one unit row (unit_id, session_pk, seq, ts) with its index text
    and the reranking's fast fields."""
    d = tantivy.Document()
    d.add_unsigned("unit_id", row["unit_id"])
    d.add_unsigned("session_pk", row["session_pk"])
    d.add_unsigned("seq", row["seq"])
    d.add_float("ts", float(row["ts"]) if row["ts"] is not None else 0.0)
    d.add_unsigned("speaker", speaker)
    d.add_unsigned("dup", dup)
    d.add_unsigned("chars", chars)
    d.add_text("body", body)
    if one_liner:
        d.add_text("one_liner", one_liner)
    return d
