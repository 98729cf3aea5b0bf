"""`why.matched` from the index (`matched_ids`: one search, each term scoring its own
bit) says exactly what the index's own analysis of the unit's text says (`matched`:
the text analyzed here, what the fallback scan uses), for every kind of term: English
stems, CJK words and single characters (a prefix), camelCase parts, lone digits, and
words found only in a one-liner."""

from tests.index.test_tail import QUERIES, build

from memoryd.store.units import units_by_id


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
