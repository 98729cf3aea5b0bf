"""The shapes of a ranked search (`memoryd.index.reader`, `memoryd.index.query`): an OR
query's one-liner clauses searched apart, an AND query's disjoint parts searched side by
side, give the same hits with the same scores as the one plain query that scores every
match, in a real tantivy index and through a real store whose live tail shifts the
statistics."""

import random

import pytest
import tantivy

from memoryd.index import Filters
from memoryd.index.bm25 import main_stats
from memoryd.index.query import (
    WEAK,
    _may_match,
    idf,
    ids_query,
    term_clause,
    term_tokens,
    text_query,
)
from memoryd.index.schema import ANALYZER, build_analyzer, build_schema, document
from memoryd.index.tail import TailPolicy
from memoryd.index.text import index_text, weak_term
from memoryd.models import Record
from memoryd.daemon.store_index import open_store
from memoryd.store.sessions import session_pk
from memoryd.store.summaries import save_one_liners
from memoryd.store.units import store_record

VOCAB = ("deploy cluster rollback database migration schema index query latency cache "
         "redis postgres tantivy search token budget context summary agent session memory "
         "watcher socket daemon config retention export parseJsonLine 部署 集群 数据库 "
         "a 4 don't").split()
RARE = [f"rare{i}" for i in range(40)]
QUERIES = [["deploy", "rare3"], ["cluster", "rollback"], ["rare1", "rare2", "deploy"],
           ["database", "migration", "schema", "rare7"], ["redis", "4"], ["a", "cache"],
           ["parseJsonLine", "config"], ["部署", "数据库"], ["don't", "memory", "rare9"],
           ["socket", "daemon", "watcher", "session"], ["nothere", "deploy"]]


def text(rng: random.Random) -> str:
    words = [VOCAB[min(int(rng.paretovariate(0.9)) - 1, len(VOCAB) - 1)]
             for _ in range(rng.randint(3, 40))]
    if rng.random() < 0.05:
        words.append(rng.choice(RARE))
    return " ".join(words)


def built(tmp_path):
    """4,000 documents in several segments, one in 11 with a one-liner: (schema,
    analyzer, searcher)."""
    schema, analyzer = build_schema(), build_analyzer()
    idx = tantivy.Index(schema, path=str(tmp_path))
    idx.register_tokenizer(ANALYZER, analyzer)
    w = idx.writer(heap_size=16_000_000, num_threads=1)
    rng = random.Random(7)
    for i in range(4000):
        row = {"unit_id": i + 1, "session_pk": i % 9, "seq": i, "ts": 1.7e9 + i}
        one = index_text(text(rng)) if i % 11 == 0 else ""
        w.add_document(document(row, index_text(text(rng)), one))
        if i % 1500 == 1499:
            w.commit()  # several segments
    w.commit()
    w.wait_merging_threads()
    idx.reload()
    return schema, analyzer, idx.searcher()


def per_term(schema, analyzer, s, terms, occur):
    """The per-term shape: each term the union of its body and one-liner clauses."""
    clauses = []
    for t in terms:
        tokens = term_tokens(analyzer, t)
        fields = [(tantivy.Occur.Should, term_clause(schema, "body", t, tokens))]
        if _may_match(s, "one_liner", t, tokens):
            fields.append((tantivy.Occur.Should, tantivy.Query.const_score_query(
                term_clause(schema, "one_liner", t, tokens), 3.0 * idf(s, tokens))))
        q = tantivy.Query.boolean_query(fields)
        clauses.append((occur, tantivy.Query.boost_query(q, WEAK) if weak_term(t) else q))
    return tantivy.Query.boolean_query(clauses)


@pytest.mark.parametrize("mode", ["or", "and"])
def test_a_query_scores_each_term_as_its_fields_sum(tmp_path, mode):
    """An OR query is one flat union of every term's body and one-liner clauses (one
    union per term cost 40% more with one-liners); an AND query with one-liner clauses
    is two disjoint parts, every term in the body and no one-liner match, or some
    one-liner match (an intersection of per-term unions cost 2.3x). Both match the units
    the per-term shape matches, each scoring the sum over its terms of the term's body
    BM25 and its one-liner bonus, a weak term's scaled down."""
    schema, analyzer, s = built(tmp_path)
    occur = tantivy.Occur.Must if mode == "and" else tantivy.Occur.Should
    both = matched = 0
    for terms in [*QUERIES, ["deploy", "cluster"], ["cache", "a"], ["schema", "index"]]:
        terms = [t for t in terms if term_tokens(analyzer, t)]
        want = s.search(per_term(schema, analyzer, s, terms, occur), 40, count=True)
        got = s.search(text_query(schema, analyzer, s, terms, mode), 40, count=True)
        assert got.count == want.count, terms
        assert [(d.segment_ord, d.doc) for _, d in got.hits] == \
            [(d.segment_ord, d.doc) for _, d in want.hits], terms
        assert [sc for sc, _ in got.hits] == pytest.approx([sc for sc, _ in want.hits],
                                                           rel=1e-6)
        both += sum(_may_match(s, "one_liner", t, term_tokens(analyzer, t)) for t in terms)
        matched += want.count
    assert both > 10 and matched > 100  # one-liner clauses took part; units matched


@pytest.mark.parametrize("idle", [True, False])
def test_an_and_querys_parts_searched_side_by_side_are_the_one_query(tmp_path, idle):
    """`_side_by_side`: an AND query with one-liner clauses searched as its two disjoint
    parts (`text_parts`), one on the helper thread (idle) or both here (the helper busy
    with another request), gives the one query's top k and its count."""
    from memoryd.index.helper import Helper
    from memoryd.index.query import text_parts
    from memoryd.index.reader import _side_by_side

    schema, analyzer, s = built(tmp_path)
    helper = Helper()
    if not idle:
        helper._busy.acquire()
    split = 0
    for terms in [*QUERIES, ["deploy", "cluster"], ["cache", "a"], ["schema", "index"]]:
        parts = text_parts(schema, analyzer, s, terms, "and")
        split += len(parts) == 2
        for k in (5, 40):
            got, count = _side_by_side(helper, s, parts, k, True)
            want = s.search(text_query(schema, analyzer, s, terms, "and"), k, count=True)
            assert count == want.count, terms
            assert [(d.segment_ord, d.doc) for _, d in got] == \
                [(d.segment_ord, d.doc) for _, d in want.hits], (terms, k)
            assert [sc for sc, _ in got] == pytest.approx([sc for sc, _ in want.hits],
                                                          rel=1e-6)
            assert _side_by_side(helper, s, parts, k, False)[1] is None
    assert split >= 5


def put(texts_, sid):
    def run(c):
        pk = session_pk(c, "generic", sid, project=f"/p/{sid}")
        return [store_record(c, pk, Record("user" if i % 2 else "assistant", t,
                                           ts=1.7e9 + 60 * i), f"{sid}-{i}", None, 0).unit_id
                for i, t in enumerate(texts_)]
    return run


async def ranked_alike(store, queries, ask):
    """`ask(conn, terms, filters, side)` (`ranked` one way or the other) ranks the same
    units with the same scores (to f32 rounding) for sides True and False, for each of
    the queries, unfiltered and filtered."""
    for f in (Filters(), Filters(project="/p/base")):
        for terms in queries:
            a, b = [await store.read(lambda c, side=side, terms=terms, f=f: ask(
                c, terms, f, side)) for side in (True, False)]
            assert [c["unit_id"] for c in a[1]] == [c["unit_id"] for c in b[1]], terms
            assert [c["bm25"] for c in a[1]] == pytest.approx([c["bm25"] for c in b[1]],
                                                              rel=1e-5)


def test_the_statistics_are_read_through_the_rarest_probe_a_live_document_holds(tmp_path):
    """`main_stats` reads N and the average length from one hit of its rarest probe (a
    query's token: cheap), passing over a probe whose documents are all deleted."""
    schema, analyzer = build_schema(), build_analyzer()
    idx = tantivy.Index(schema, path=str(tmp_path))
    idx.register_tokenizer(ANALYZER, analyzer)
    w = idx.writer(heap_size=16_000_000, num_threads=1)
    for i in range(50):
        row = {"unit_id": i + 1, "session_pk": 1, "seq": i, "ts": 1.7e9 + i}
        w.add_document(document(row, "only here" if i == 7 else f"deploy cluster {i}", ""))
    w.commit()
    w.delete_documents_by_query(ids_query(schema, [8]))  # the one holding "only"
    w.commit()
    w.wait_merging_threads()
    idx.reload()
    s = idx.searcher()
    assert s.doc_freq("body", "onli") == 1 and s.num_docs == 49  # counted, not live
    want = main_stats(s, schema)
    got = main_stats(s, schema, ("onli", "cluster"))
    assert got == want and got.docs == 50 and got.live == 49 and got.tokens > 0


def test_an_or_search_with_its_one_liner_clauses_apart_is_the_one_query(tmp_path):
    """`_best` of `_one_liner_hits`: the top k of the body clauses alone, merged with the
    top k of the units a one-liner clause matches (scored by both fields), is the top k of
    the one query over both fields: the same units in the same order, the same scores to
    f32 rounding, filtered or not."""
    from memoryd.index.query import restricted
    from memoryd.index.reader import _best, _one_liner_hits

    schema, analyzer, s = built(tmp_path)
    session = [(tantivy.Occur.Must, tantivy.Query.term_query(schema, "session_pk", 3))]
    apart = 0
    for terms in [*QUERIES, ["deploy", "cluster"], ["cache", "a"], ["schema", "index"]]:
        body = text_query(schema, analyzer, s, terms, "or", fields=("body",))
        ones = text_query(schema, analyzer, s, terms, "or", fields=("one_liner",))
        full = text_query(schema, analyzer, s, terms, "or")
        if ones is None:
            continue
        for clauses in ([], session):
            for k in (5, 20, 60):
                first = s.search(restricted(body, clauses), k, count=False).hits
                got = _best(k, first, _one_liner_hits(s, body, ones, clauses, k))
                want = s.search(restricted(full, clauses), k, count=False).hits
                assert [(d.segment_ord, d.doc) for _, d in got] == \
                    [(d.segment_ord, d.doc) for _, d in want], (terms, k, clauses)
                assert [sc for sc, _ in got] == pytest.approx([sc for sc, _ in want],
                                                              rel=1e-6)
                apart += got != first
    assert apart > 20  # one-liner matches changed the body-only top k


async def test_ranked_with_one_liner_clauses_apart_ranks_as_the_one_query(tmp_path):
    """Through a store, with a live tail and without, filtered or not (filtered: always
    the one query): `ranked` without an exact count (the one-liner clauses searched
    apart) gives the candidates it gives with one (the one query). Here "deploy", in
    nearly every unit, has a negative IDF once the units given one-liners were indexed
    again (their old documents still count in its frequency): its queries keep the one
    query."""
    from memoryd.index.reader import _no_negative_idf

    store = await open_store(tmp_path / "m.db")
    store.index.tail_policy = TailPolicy(docs=10**9, seconds=3600.0)
    rng = random.Random(5)
    try:
        base = await store.write(put([text(rng) for _ in range(1500)], "base"))
        await store.indexed()
        await store.write(lambda c: save_one_liners(
            c, [(u, text(rng), "test", "v1") for u in base[::7]]))
        await store.indexed()
        store.index.tail_policy = TailPolicy(docs=1, seconds=0.0)  # commit them
        store.index.notify_write()
        await store.indexed()
        ix = store.index
        for live in (False, True):
            if live:
                ix.tail_policy = TailPolicy(docs=10**9, seconds=3600.0)
                new = await store.write(put([text(rng) for _ in range(40)], "live"))
                await store.write(lambda c: save_one_liners(
                    c, [(u, "deploy rare3 summary", "test", "v1") for u in new[::4]]))
                await store.indexed()
                assert len(ix.tail) == 40
            else:
                while len(ix.tail):
                    await store.indexed()
            s = ix._index.searcher()
            assert not _no_negative_idf(s, ix.analyzer, ["deploy"])
            assert sum(_no_negative_idf(s, ix.analyzer, t) for t in QUERIES) >= 5
            await ranked_alike(store, [*QUERIES, ["deploy", "cluster"], ["cache", "a"]],
                               lambda c, terms, f, exact: ix.ranked(
                                   c, terms, f, mode="or", limit=25, count=exact))
    finally:
        await store.close()


def test_a_terms_tokens_are_kept_and_each_caller_gets_its_own_list():
    """`term_tokens` analyzes a term once (a search asks 6-10 times) and hands out a new
    list each time, so no caller can change what the next one gets."""
    from memoryd.index.query import _term_tokens

    analyzer = build_analyzer()
    first = term_tokens(analyzer, "deploying")
    first.append("changed")
    hits = _term_tokens.cache_info().hits
    assert term_tokens(analyzer, "deploying") == ["deploy"]
    assert _term_tokens.cache_info().hits == hits + 1
    assert term_tokens(analyzer, "数据库") == ["数据", "据库"]
