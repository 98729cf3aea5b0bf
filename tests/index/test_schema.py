"""The index schema's field options: `seq` and `ts` are fast columns only (their range
filters read the column), and an index of the schema before (both indexed as well) is
rebuilt in the background while search falls back."""

import pytest
import tantivy

import memoryd.index as index_mod
from memoryd.index import Filters
from memoryd.index.schema import ANALYZER, SCHEMA_VERSION
from memoryd.models import Record
from memoryd.daemon.store_index import open_store
from memoryd.store.sessions import session_pk
from memoryd.store.units import store_record

T0 = 1_760_000_000.0


def schema_3() -> tantivy.Schema:
    """The schema of SCHEMA_VERSION 3, as that code built it."""
    sb = tantivy.SchemaBuilder()
    sb.add_text_field("body", tokenizer_name=ANALYZER, index_option="freq")
    sb.add_text_field("one_liner", tokenizer_name=ANALYZER, index_option="freq")
    sb.add_unsigned_field("unit_id", indexed=True, fast=True)
    sb.add_unsigned_field("session_pk", indexed=True, fast=True)
    sb.add_unsigned_field("seq", indexed=True, fast=True)
    sb.add_float_field("ts", indexed=True, fast=True)
    sb.add_unsigned_field("speaker", fast=True)
    sb.add_unsigned_field("dup", fast=True)
    sb.add_unsigned_field("chars", fast=True)
    return sb.build()


def put(c):
    """Ten units about herons in one session, an hour apart (seq 1..10)."""
    pk = session_pk(c, "generic", "s", project="/p")
    for i in range(10):
        store_record(c, pk, Record("user", f"heron number {i}", ts=T0 + 3600 * i), f"r{i}",
                     None, 0)
    return pk


async def found(store, f: Filters) -> int:
    total, _ = await store.read(lambda c: store.index.candidates(
        c, ["heron"], f, mode="or", limit=20, count=True))
    return total


def indexed(root, field: str, value) -> bool:
    """Whether `field` has terms in the index at `root` (a term query on a field that is
    not indexed is refused)."""
    ix = tantivy.Index.open(str(root / "tantivy"))
    try:
        ix.searcher().search(tantivy.Query.term_query(ix.schema, field, value), 1)
    except ValueError as e:
        assert "not indexed" in str(e)
        return False
    return True


async def test_an_index_of_schema_3_is_rebuilt_with_seq_and_ts_as_columns(tmp_path,
                                                                          monkeypatch):
    assert SCHEMA_VERSION == 4
    with monkeypatch.context() as m:  # the code before: schema 3
        m.setattr(index_mod, "SCHEMA_VERSION", 3)
        m.setattr(index_mod, "build_schema", schema_3)
        store = await open_store(tmp_path / "m.db")
        try:
            pk = await store.write(put)
            await store.indexed()
            assert store.index.docs() == 10
        finally:
            await store.close()
    root = tmp_path / "index"
    assert indexed(root, "ts", T0) and indexed(root, "seq", 1)

    store = await open_store(tmp_path / "m.db")
    try:
        assert store.index.state == "rebuilding"
        assert await found(store, Filters()) == 10  # the fallback scan meanwhile
        await store.indexed()
        assert store.index.state == "ready" and store.index.docs() == 10
        assert not indexed(root, "ts", T0) and not indexed(root, "seq", 1)
        assert indexed(root, "session_pk", pk)
        # the range filters read the columns: a time range, the asking session's tail
        assert await found(store, Filters(since=T0 + 3600 * 2, until=T0 + 3600 * 5)) == 4
        assert await found(store, Filters(since=T0 + 3600 * 8)) == 2
        assert await found(store, Filters(exclude=[(pk, 7)])) == 6
        assert await found(store, Filters(since=T0 + 3600, exclude=[(pk, 4)])) == 2
    finally:
        await store.close()


@pytest.mark.parametrize("field", ["seq", "ts"])
async def test_a_new_index_holds_no_terms_of_the_range_fields(tmp_path, field):
    store = await open_store(tmp_path / "m.db")
    try:
        await store.write(put)
        await store.indexed()
        assert store.index.state == "ready"
    finally:
        await store.close()
    assert not indexed(tmp_path / "index", field, T0 if field == "ts" else 1)
    assert indexed(tmp_path / "index", "unit_id", 1)
