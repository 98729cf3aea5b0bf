"""`why.matched` from the index (`matched_ids`: one search, each term scoring its own
bit) says exactly what the index's own analysis of the unit's text says (`matched`:
the text analyzed here, what the fallback scan uses), for every kind of term: English
stems, CJK words and single characters (a prefix), camelCase parts, lone digits, and
words found only in a one-liner."""

import asyncio

from memoryd.index.tail import TailPolicy
from memoryd.store.units import units_by_id
from tests.index.test_tail import HOLD, QUERIES, build, put, texts


async def test_matched_ids_agree_with_the_analysis_of_the_text(tmp_path):
    store, new = await build(tmp_path, "m", tail=False)
    try:
        ids = list(range(1, 121)) + new
        rows = await store.read(lambda c: units_by_id(c, ids))
        texts = {u: r["content"] + "\n" + (r["one_liner"] or "") for u, r in rows.items()}
        assert any(r["one_liner"] for r in rows.values())
        multi = [q + ["deploy", "部署", "数", "getUserName"] for q in QUERIES]
        seen = 0
        for terms in QUERIES + multi:
            by_index = store.index.matched_ids(terms, ids)
            by_text = store.index.matched(terms, texts)
            assert {u: s for u, s in by_index.items() if s} == \
                {u: s for u, s in by_text.items() if s}, terms
            seen += sum(len(s) for s in by_index.values())
        assert seen > 500  # the terms matched many of the units
    finally:
        await store.close()


async def test_matched_ids_where_ranked_found_the_units_say_the_same(tmp_path):
    """Asked with the addresses `ranked` found the units at (its candidates' "at"),
    `matched_ids` searches that searcher and maps the hits back by address: the same
    terms per unit as asked without them, also after later commits moved the index on,
    and with a unit the addresses do not cover (then it asks the index as usual)."""
    from memoryd.index import Filters

    store, new = await build(tmp_path, "a", tail=True)
    try:
        ix = store.index
        asked = [q + ["deploy", "部署", "数", "getUserName"] for q in QUERIES] + QUERIES
        found = {}
        for terms in asked:
            got = await store.read(lambda c, terms=terms: ix.ranked(
                c, terms, Filters(), mode="or", limit=40, count=False))
            found[tuple(terms)] = got[1]
        held = 0
        for terms in asked:
            cands = found[tuple(terms)]
            at = {c["unit_id"]: c["at"] for c in cands if "at" in c}
            ids = [c["unit_id"] for c in cands if "at" in c]
            held += len(ids)
            assert ix.matched_ids(terms, ids, at) == ix.matched_ids(terms, ids), terms
        assert held > 200
        ix.tail_policy = TailPolicy(docs=1, seconds=0.0)  # commit the tail: a reload
        ix.notify_write()
        while len(ix.tail):
            await asyncio.sleep(0.01)
        for terms in asked:
            cands = found[tuple(terms)]
            at = {c["unit_id"]: c["at"] for c in cands if "at" in c}
            ids = [c["unit_id"] for c in cands]  # the tail's too: not all in `at`
            assert ix.matched_ids(terms, ids, at) == ix.matched_ids(terms, ids), terms
            some = [u for u in ids if u in at]
            assert ix.matched_ids(terms, some, at) == ix.matched_ids(terms, some), terms
    finally:
        await store.close()


async def test_field_scores_where_ranked_found_the_units_say_the_same(tmp_path):
    """`field_scores` asked with the addresses `ranked` found the units at gives what it
    gives without them: while no commit came since (the addresses map the hits back),
    and after one (it reads the index as usual)."""
    from memoryd.index import Filters

    store, new = await build(tmp_path, "f", tail=False)
    try:
        ix = store.index
        asked = [["deploy"], ["deploy", "cache"], ["one", "liner", "deploy", "redis"]]

        async def ranked(terms):
            got = await store.read(lambda c: ix.ranked(c, terms, Filters(), mode="or",
                                                       limit=60, count=False))
            return {c["unit_id"]: c["at"] for c in got[1] if "at" in c}

        split = 0
        for terms in asked:
            at = await ranked(terms)
            ids = sorted(at)
            with_at = ix.field_scores(terms, ids, at=at)
            assert with_at == ix.field_scores(terms, ids), terms
            split += len(with_at)
        assert split > 5  # one-liners matched: scores split by field
        at = await ranked(asked[1])
        await store.write(put(texts(5, 99), "later"))  # a commit: a new generation
        ix.notify_write()
        await store.indexed()
        while len(ix.tail):
            await asyncio.sleep(0.01)
        ids = sorted(at)
        assert ix.field_scores(asked[1], ids, at=at) == ix.field_scores(asked[1], ids)
    finally:
        await store.close()


ONE_LINERS = ["deploy the 部署 cache", "getUserName 数据库迁移 4", "kubernetes rollback x",
              "parse json redis", "search token budget", "memory context deploy 数"]


async def test_split_scores_say_what_the_field_searches_say(tmp_path):
    """`split_scores` (the one-liner's share from its analyzed text and the terms' IDF,
    the body's the rest of `ranked`'s score) gives what `field_scores`' two searches give,
    to f32 rounding: for OR and AND queries of every kind of term, one-liners matching
    one term, several, a weak one (a lone digit, one letter), CJK words and characters,
    or none; and exactly `field_scores` while the tail holds units."""
    import math

    from memoryd.index import Filters
    from memoryd.store.summaries import save_one_liners

    store, new = await build(tmp_path, "s", tail=False)
    try:
        ix = store.index
        lines = [(u, ONE_LINERS[u % len(ONE_LINERS)], "test", "v1") for u in range(1, 601, 3)]
        await store.write(lambda c: save_one_liners(c, lines))
        await store.indexed()
        while len(ix.tail):
            await asyncio.sleep(0.01)
        asked = QUERIES + [q + ["deploy", "部署", "数", "getUserName"] for q in QUERIES]
        split = 0
        for terms in asked:
            for mode in ("or", "and"):
                got = await store.read(lambda c, t=terms, m=mode: ix.ranked(
                    c, t, Filters(), mode=m, limit=60, count=False))
                cands = got[1]
                rows = await store.read(
                    lambda c, ids=[x["unit_id"] for x in cands]: units_by_id(c, ids))
                have = {u: r["one_liner"] for u, r in rows.items() if r["one_liner"]}
                whole = {x["unit_id"]: x["bm25"] for x in cands}
                at = {x["unit_id"]: x["at"] for x in cands}
                fast = ix.split_scores(terms, have, whole, at=at)
                slow = ix.field_scores(terms, list(have), at=at)
                # the one-liners' terms from the index (`matched_fields`): the same split
                matched, held = ix.matched_fields(terms, list(whole), at)
                assert (held is not None) == bool(whole), terms
                held = held or {}
                assert matched == ix.matched_ids(terms, list(whole)), (terms, mode)
                assert {u: h for u, h in held.items() if u in have} == {
                    u: h for u, h in ix.matched(terms, have).items() if h}, (terms, mode)
                assert ix.split_scores(terms, have, whole, at=at, held=held) == fast
                assert fast.keys() == slow.keys(), (terms, mode)
                for u, (body, one) in slow.items():
                    assert math.isclose(fast[u][0], body, rel_tol=2 ** -20, abs_tol=1e-5)
                    assert math.isclose(fast[u][1], one, rel_tol=2 ** -20), (terms, u)
                split += len(fast)
        assert split > 300  # many hits' one-liners matched
        # units in the tail again, held there: under `build`'s commit-at-once policy a
        # commit in flight could land between the two calls below and move the
        # statistics (the tail's exact lengths against the index's quantised ones)
        ix.tail_policy = HOLD
        commits = ix._indexer.commits
        await store.write(put(texts(5, 77), "later"))
        await store.write(put(texts(5, 78), "held"))
        await store.indexed()
        assert len(ix.tail) == 10
        rows = await store.read(lambda c: units_by_id(c, [u for u, *_ in lines]))
        have = {u: r["one_liner"] for u, r in rows.items()}
        assert ix.split_scores(["deploy", "4"], have, dict.fromkeys(have, 9.0)) == \
            ix.field_scores(["deploy", "4"], list(have))
        assert ix._indexer.commits == commits
    finally:
        await store.close()
