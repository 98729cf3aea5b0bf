"""Probe questions for `memoryctl eval` (`memoryd.recall.evaluate`): turns sampled from the
store, each turned into a query whose answer is known (the turn itself).

**Sampling.** User messages and assistant messages with substance (six searchable words),
of bounded length (not tool output, not compaction notes; the store is already redacted),
drawn by a seeded generator: the same seed on the same store draws the same turns. A
small store gives all its turns to the draw; a big one is read at random unit ids (the
next message at or after each), so a sample never scans the table. Turns that follow a
gap of ids (forgotten, archived) are a little more likely to be drawn.

**Cloze probes.** A turn's searchable words (the index's own tokenizer: stop words out,
a CJK run as its bigrams, `memoryd.index.text`), ranked by rarity among the sampled
turns (their document frequency there: the sample is the store's in miniature), then by
length; 3 to 6 of the rarer half kept at random, shuffled, the rest dropped. They are
known-item probes built from the turn's own words: they favour a lexical ranking, and
say little about a question asked in other words (`--questions model` comes closer).

**Model questions.** The configured model writes one question each turn answers, only
when that model is served on this machine (`llm.api_base` on loopback or a Unix socket):
nothing leaves the machine.
"""

from __future__ import annotations

import ipaddress
import random
import sqlite3
from collections import Counter
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from memoryd.errors import BadRequestError
from memoryd.index.text import content_terms, is_cjk, query_terms, split_cjk, weak_term
from memoryd.llm import LLMBadResponseError
from memoryd.store.units import id_bounds

if TYPE_CHECKING:
    from memoryd.llm import LLM

MIN_CHARS, MAX_CHARS = 10, 2000  # a turn's length to be drawn (CJK: 10 is a sentence)
MIN_WORDS, MAX_WORDS = 3, 6      # words a cloze probe keeps
SUBSTANCE = 6                    # words an assistant turn needs to be drawn ("Now fix x:")
ELIGIBLE = ("u.kind = 'message' AND u.role IN ('user', 'assistant') "
            f"AND u.chars BETWEEN {MIN_CHARS} AND {MAX_CHARS}")
_COLUMNS = "u.id, u.seq, u.role, u.content, s.agent, s.session_id"


@dataclass(slots=True)
class Turn:
    unit_id: int
    seq: int
    role: str
    content: str
    agent: str
    session_id: str
    words: list[str]


@dataclass(slots=True)
class Probe:
    turn: Turn
    text: str


def words(text: str) -> list[str]:
    """What of a text a probe may keep: its searchable words as the index reads a query
    (CJK runs as bigrams), without one-letter words, short Latin words and long tokens
    (hashes, paths)."""
    return [t for t in split_cjk(content_terms(query_terms(text)))
            if not weak_term(t) and (is_cjk(t) or 3 <= len(t) <= 30)]


def sample_turns(conn: sqlite3.Connection, n: int, seed: int) -> list[Turn]:
    """Up to `n` distinct turns with at least `MIN_WORDS` words (an assistant's:
    `SUBSTANCE`), drawn with `seed`."""
    rng = random.Random(seed)
    few = conn.execute(f"SELECT count(*) FROM (SELECT 1 FROM units u WHERE {ELIGIBLE} "
                       "LIMIT ?)", (3 * n,)).fetchone()[0]
    rows: dict[int, Any] = {}
    if few < 3 * n:  # a small store: draw from all of it
        ids = [r[0] for r in conn.execute(f"SELECT u.id FROM units u WHERE {ELIGIBLE} "
                                          "ORDER BY u.id")]
        rng.shuffle(ids)
        for r in _rows(conn, ids):
            rows[r[0]] = r
    else:
        lo, hi = id_bounds(conn)
        for _ in range(4 * n):
            if len(rows) >= 2 * n:
                break
            r = conn.execute(f"SELECT {_COLUMNS} FROM units u JOIN sessions s ON "
                             f"s.id = u.session_pk WHERE u.id >= ? AND {ELIGIBLE} "
                             "ORDER BY u.id LIMIT 1", (rng.randint(lo, hi),)).fetchone()
            if r is not None:
                rows.setdefault(r[0], r)
    out: list[Turn] = []
    for r in rows.values():
        if len(out) >= n:
            break
        if len(w := words(r[3])) >= (MIN_WORDS if r[2] == "user" else SUBSTANCE):
            out.append(Turn(r[0], r[1], r[2], r[3], r[4], r[5], w))
    return out


def _rows(conn: sqlite3.Connection, ids: list[int]) -> list[Any]:
    """The turns of these ids, in the order given."""
    got: dict[int, Any] = {}
    for i in range(0, len(ids), 500):
        part = ids[i:i + 500]
        got.update((r[0], r) for r in conn.execute(
            f"SELECT {_COLUMNS} FROM units u JOIN sessions s ON s.id = u.session_pk "
            f"WHERE u.id IN ({','.join('?' * len(part))})", part))
    return [got[i] for i in ids if i in got]


def cloze(turns: list[Turn], seed: int) -> list[Probe]:
    """Each turn's probe: 3-6 of its rarer words (`MIN_WORDS`, `MAX_WORDS`), shuffled."""
    df = Counter(w for t in turns for w in set(t.words))
    out = []
    for t in turns:
        ranked = sorted(set(t.words), key=lambda w: (df[w], -len(w), w))
        k = min(MAX_WORDS, max(MIN_WORDS, len(ranked) // 3))
        rng = random.Random(f"{seed}:{t.unit_id}")  # one turn's probe, whatever else is drawn
        kept = rng.sample(ranked[:2 * k], min(k, len(ranked)))
        rng.shuffle(kept)
        out.append(Probe(t, " ".join(kept)))
    return out


def refuse_remote(llm: LLM | None) -> None:
    """A 400 unless a model is configured and served on this machine."""
    if llm is None or llm.model is None:
        raise BadRequestError("questions=model needs a model ([llm] model and api_base, "
                              "served on this machine)", field="questions")
    base = llm.choice.api_base or ""
    if not _local(base):
        where = f"llm.api_base is {base}" if base else "llm.api_base is not set"
        raise BadRequestError(
            f"questions=model sends your turns to the model, and nothing may leave this "
            f"machine: {where}; set it to a server on localhost, 127.0.0.1, ::1 or a Unix "
            "socket, or use questions=cloze", field="questions")


def _local(base: str) -> bool:
    if base.startswith(("/", "unix:", "http+unix:")):
        return True
    try:
        host = urlsplit(base if "//" in base else "//" + base).hostname or ""
    except ValueError:
        return False
    try:
        return host == "localhost" or ipaddress.ip_address(host).is_loopback
    except ValueError:  # a name
        return False


PROMPT = ("Here is a message from a past conversation with an AI assistant:\n<message>\n"
          "{text}\n</message>\nWrite one short question (under 20 words) that this message "
          "answers, asked weeks later by someone who no longer remembers its wording. "
          "Reply with the question only.")


async def model_question(llm: LLM, turn: Turn) -> str:
    """The model's question for a turn ("" when it gave none: that turn makes no probe;
    a model that cannot be reached ends the run, saying why)."""
    try:
        c = await llm.complete([{"role": "user",
                                 "content": PROMPT.format(text=turn.content[:1500])}],
                               purpose="eval", target=f"unit:{turn.unit_id}", max_tokens=80)
    except LLMBadResponseError:
        return ""
    line = next((x.strip() for x in c.text.splitlines() if x.strip()), "")
    return line.strip("\"'` ")[:300]
