"""Index text and query analysis through a real store and its tantivy index: CJK
bigrams, stemming, camelCase parts, AND/OR, weak terms, filters, crash recovery."""

import pytest

from memoryd.index import Filters
from memoryd.index.text import (
    camel_parts,
    content_terms,
    index_text,
    query_terms,
    snippet,
    split_cjk,
)
from memoryd.models import Record
from memoryd.daemon.store_index import open_store
from memoryd.store.sessions import session_pk
from memoryd.store.units import store_record


@pytest.fixture
async def store(tmp_path):
    s = await open_store(tmp_path / "m.db")
    yield s
    await s.close()


@pytest.fixture
async def fts_db(store):
    """fts_db(rows) -> a search function: (query, mode) -> the 1-based row numbers that
    match, in order."""

    async def make(rows, sid="s"):
        def put(c):
            pk = session_pk(c, "generic", sid, project="/p")
            for i, r in enumerate(rows, 1):
                store_record(c, pk, Record("user", r), f"{sid}{i}", None, 0)

        await store.write(put)
        await store.indexed()
        first = await store.read(lambda c: c.execute(
            "SELECT min(u.id) FROM units u JOIN sessions s ON s.id = u.session_pk "
            "WHERE s.session_id = ?", (sid,)).fetchone()[0])

        async def hits(query, mode="or", *, ranked=False, split=False):
            terms = query_terms(query)
            terms = split_cjk(terms) if split else terms
            _, found = await store.read(lambda c: store.index.candidates(
                c, terms, Filters(session_id=sid), mode=mode, limit=50, count=False))
            got = [u - first + 1 for u, _ in found]
            return got if ranked else sorted(got)

        return hits

    return make


async def test_two_character_chinese_word_matches(fts_db):
    hits = await fts_db(["我们今天讨论了数据库迁移的方案", "机器学习模型训练", "hello world"])
    assert await hits("迁移") == [1]
    assert await hits("学习") == [2]
    assert await hits("数据库迁移") == [1]
    assert await hits("训练 hello") == [2, 3]


async def test_single_chinese_character_matches_anywhere_in_a_run(fts_db):
    hits = await fts_db(["机器学习", "猫"])
    assert await hits("习") == [1]
    assert await hits("猫") == [2]


async def test_chinese_phrase_does_not_match_scattered_characters(fts_db):
    hits = await fts_db(["学生 习惯", "学习"])
    assert await hits("学习") == [2]


async def test_english_is_stemmed_and_case_folded(fts_db):
    hits = await fts_db(["Running the migrations", "a runner"])
    assert await hits("migration run") == [1]


async def test_and_mode_requires_every_term(fts_db):
    hits = await fts_db(["sqlite wal mode", "sqlite journal", "wal"])
    assert await hits("sqlite wal", "and") == [1]
    assert await hits("sqlite wal", "or") == [1, 2, 3]


async def test_query_with_fts_syntax_is_quoted(fts_db):
    hits = await fts_db(['she said "NEAR" and OR'])
    assert await hits('NEAR( "OR" * ^') == [1]
    assert query_terms("!!! ...") == []


async def test_snippet_centres_on_match(fts_db):
    text = "x " * 300 + "the needle is here " + "y " * 300
    s = snippet(text, ["needle"])
    assert "needle" in s and len(s) <= 245 and s.startswith("…")


def _flattened_window(text: str, terms: list[str], width: int = 240) -> str:
    """`snippet` by its definition: the stretch of 4 widths around the first match (in
    the lower-cased text) flattened whole, and the window around the first match in it."""
    def first(low: str) -> int:
        at = [low.find(t[: max(3, len(t) - 2)]) for t in terms]
        return min((p for p in at if p != -1), default=-1)
    at = first(text.lower())
    start = max(0, at - 2 * width) if at != -1 else 0
    head, tail = start > 0, start + 4 * width < len(text)
    flat = " ".join(text[start:start + 4 * width].split())
    pos = first(flat.lower())
    if pos == -1:
        return ("…" if head else "") + flat[: width - 1] + "…"
    lo = max(0, pos - width // 3)
    hi = min(len(flat), lo + width)
    return ("…" if lo or head else "") + flat[lo:hi] + ("…" if hi < len(flat) or tail else "")


@pytest.mark.parametrize("text", [
    "x " * 300 + "the needle is here " + "y " * 300,                  # plain prose
    "def f():\n" + "    return 1\n" * 60 + "    needle()\n" + "\n" * 40 + "z" * 900,
    " " * 700 + "needle" + "\t" * 700 + "end",                       # whitespace runs
    "needle at the very start " + "w " * 600,
    "a" * 1000 + "Needles" + "b" * 100,                                # inside one word
    "q " * 500 + "needle" + "  \n  " * 50,                            # at the end
    "q " * 500 + "no match at all " * 20,
])
def test_long_snippets_are_the_window_of_the_flattened_stretch(text):
    """A long ASCII hit's snippet is made from the stretch around its match alone
    (flattening all of it was two thirds of a snippet's time): the same string as
    flattening the whole stretch, wherever the match and the whitespace fall."""
    for terms in (["needle"], ["needles", "start"], ["nothing"]):
        assert snippet(text, terms) == _flattened_window(text, terms), (terms, text[:40])


async def test_camel_case_words_are_also_indexed_as_parts(fts_db):
    assert camel_parts("my iPhone and getUserName, XMLHttpRequest #PlankChallenge") == [
        "i", "Phone", "get", "User", "Name", "XML", "Http", "Request", "Plank", "Challenge"]
    assert index_text("plain words") == "plain words"
    hits = await fts_db(["a cracked iPhone screen", "getUserName() returns None", "phone book"])
    assert await hits("phone") == [1, 3]
    assert await hits("iphone") == [1]
    assert await hits("user name", "and") == [2]
    assert await hits("getusername") == [2]


async def test_camel_parts_do_not_break_phrases(fts_db):
    hits = await fts_db(["the iPhone 13 Pro", "数据库 iPhone"])
    assert await hits("数据库") == [2]
    assert await hits("iphone 13 pro", "and") == [1]
    assert await hits("don't") == []  # a multi-token word is a phrase, not two words


async def test_stop_words_are_dropped_unless_nothing_is_left(fts_db):
    terms = query_terms("What was my previous goal for my Apex Legends level before I updated?")
    assert content_terms(terms) == ["previous", "goal", "apex", "legends", "level", "updated"]
    assert content_terms(query_terms("to be or not to be")) == ["to", "be", "or", "not"]
    assert content_terms(query_terms("I'm sure it's what I’m after")) == ["sure"]
    assert content_terms(query_terms("Can you suggest some tips for my garden?")) == ["garden"]


async def test_long_cjk_runs_split_into_bigrams(fts_db):
    assert split_cjk(["数据库迁移", "迁移", "sqlite", "猫"]) == [
        "数据", "据库", "库迁", "迁移", "sqlite", "猫"]
    hits = await fts_db(["数据库迁移的方案", "迁移", "数据"])
    got = await hits("数据库迁移怎么做", ranked=True, split=True)
    assert got[0] == 1 and set(got) == {1, 2, 3}


async def test_lone_digits_and_letters_weigh_little(fts_db):
    hits = await fts_db(["note 14 about 4 and 1 things", "the deploy of version 4 failed",
                         "deploy checklist"])
    assert (await hits("deploy 4 1", ranked=True))[-1] == 1  # only weak terms: last


async def test_filters_run_inside_the_index(store):
    def put(c):
        for agent, sid, ts in (("codex", "a", 100.0), ("pi", "b", 200.0)):
            pk = session_pk(c, agent, sid, project=f"/w/{sid}")
            for i in range(3):
                store_record(c, pk, Record("user", f"kafka lag {i}", ts=ts + i), f"{sid}{i}",
                             None, 0)

    await store.write(put)
    await store.indexed()

    async def n(**kw):
        total, _ = await store.read(lambda c: store.index.candidates(
            c, ["kafka"], Filters(**kw), mode="or", limit=2, count=True))
        return total

    assert await n() == 6
    assert await n(agent="pi") == 3 and await n(project_within="/w") == 6
    assert await n(project="/w/a", since=101.0) == 2 and await n(until=150.0) == 3
    pk_a = await store.read(lambda c: session_pk(c, "codex", "a"))
    assert await n(exclude=[(pk_a, 2)]) == 4
    assert await n(agent="nobody") == 0


async def test_the_index_follows_changes_and_survives_a_restart(tmp_path):
    from memoryd.store.sessions import forget_session
    from memoryd.store.summaries import save_one_liners

    async def count(store, term):
        return (await store.read(lambda c: store.index.candidates(
            c, [term], Filters(), mode="or", limit=10, count=True)))[0]

    store = await open_store(tmp_path / "m.db")
    try:
        def put(c):
            pk = session_pk(c, "generic", "s")
            for i in range(3):
                store_record(c, pk, Record("user", f"walrus {i}"), f"r{i}", None, 0)
            return pk

        pk = await store.write(put)
        await store.indexed()
        uid = await store.read(lambda c: c.execute("SELECT min(id) FROM units").fetchone()[0])
        await store.write(lambda c: save_one_liners(c, [(uid, "narwhal tusk", "x", "p")]))
        await store.indexed()
        assert await count(store, "walrus") == 3 and await count(store, "narwhal") == 1
        assert store.index.state == "ready"
    finally:
        await store.close()
    # units written while the index was closed are indexed on the next start
    store = await open_store(tmp_path / "m.db")
    try:
        await store.write(lambda c: store_record(c, pk, Record("user", "walrus late"), "r9",
                                                 None, 0))
        await store.indexed()
        assert await count(store, "walrus") == 4
        await store.write(lambda c: forget_session(c, pk))
        await store.indexed()
        assert await count(store, "walrus") == 0 and store.index.docs() == 0
    finally:
        await store.close()


async def test_a_corrupt_index_is_rebuilt_while_search_falls_back(tmp_path):
    store = await open_store(tmp_path / "m.db")
    try:
        def put(c):
            pk = session_pk(c, "generic", "s")
            for i in range(5):
                store_record(c, pk, Record("user", f"zebra crossing {i}"), f"r{i}", None, 0)

        await store.write(put)
        await store.indexed()
    finally:
        await store.close()
    for f in (tmp_path / "index" / "tantivy").glob("meta.json"):
        f.write_text("{not json")
    store = await open_store(tmp_path / "m.db")
    try:
        await store.indexed()
        assert store.index.state == "ready" and store.index.docs() == 5
        store.index.request_rebuild()
        assert store.index.state == "rebuilding"
        total, found = await store.read(lambda c: store.index.candidates(
            c, ["zebra"], Filters(), mode="or", limit=10, count=True))
        assert total == 5  # the fallback scan answers meanwhile
        await store.indexed()
        assert store.index.state == "ready" and store.index.docs() == 5
    finally:
        await store.close()


async def test_an_index_ahead_of_its_database_is_rebuilt(tmp_path):
    def put(c, n):
        pk = session_pk(c, "generic", "s")
        for i in range(n):
            store_record(c, pk, Record("user", f"otter {i}"), f"r{i}", None, 0)

    store = await open_store(tmp_path / "a.db", tmp_path / "index")
    try:
        await store.write(lambda c: put(c, 5))
        await store.indexed()
    finally:
        await store.close()
    # a new database beside the old index: unit ids 1..2 now mean other units
    store = await open_store(tmp_path / "b.db", tmp_path / "index")
    try:
        await store.write(lambda c: put(c, 2))
        await store.indexed()
        assert store.index.docs() == 2
    finally:
        await store.close()


def test_dup_key_of_ascii_text_is_the_definitions_key():
    """`dup_key` and `dup_hash` take a fast path for ASCII heads (a translate, then runs of
    spaces joined): for any ASCII text they give what the definition gives (the head,
    case folded, each run of `[\\W_]` one space, stripped), so the near-duplicate keys in
    an index do not depend on which path made them."""
    import hashlib
    import random

    from memoryd.index.text import _NON_WORD, DUP_HEAD, dup_hash, dup_key

    rng = random.Random(11)
    alphabet = "aZq09 _-\t\n\r\x0b\x0c.,;:!?()[]{}'\"\\/\x00\x1c\x7f"
    texts = ["", " ", "___", "a", " a ", "a  b", "a\t\n b", "--a--", "Hello, World!  Again",
             "x" * 500, "a " * 300, " " * 450 + "late", "A_b__C", "\x1c a \x1f b \x7f"]
    texts += ["".join(rng.choice(alphabet) for _ in range(rng.randint(0, 600)))
              for _ in range(3000)]
    for t in texts:
        want = _NON_WORD.sub(" ", t[:DUP_HEAD].casefold()).strip()
        assert dup_key(t) == want, t
        h = int.from_bytes(hashlib.blake2b(want.encode(), digest_size=8).digest(), "big")
        assert dup_hash(t) == ((h or 1) if want else 0), t
