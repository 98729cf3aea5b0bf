import sqlite3

from memoryd.store.fts import (
    TOKENIZER,
    camel_parts,
    content_terms,
    index_text,
    match_expression,
    query_terms,
    snippet,
    split_cjk,
)


def fts_db(rows):
    c = sqlite3.connect(":memory:")
    c.execute(f"CREATE VIRTUAL TABLE t USING fts5(body, tokenize='{TOKENIZER}')")
    for i, r in enumerate(rows, 1):
        c.execute("INSERT INTO t (rowid, body) VALUES (?, ?)", (i, index_text(r)))
    return c


def hits(c, query, mode="or"):
    m = match_expression(query_terms(query), mode)
    return [r[0] for r in c.execute("SELECT rowid FROM t WHERE t MATCH ? ORDER BY rowid", (m,))]


def test_two_character_chinese_word_matches():
    c = fts_db(["我们今天讨论了数据库迁移的方案", "机器学习模型训练", "hello world"])
    assert hits(c, "迁移") == [1]
    assert hits(c, "学习") == [2]
    assert hits(c, "数据库迁移") == [1]
    assert hits(c, "训练 hello") == [2, 3]


def test_single_chinese_character_matches_anywhere_in_a_run():
    c = fts_db(["机器学习", "猫"])
    assert hits(c, "习") == [1]
    assert hits(c, "猫") == [2]


def test_chinese_phrase_does_not_match_scattered_characters():
    c = fts_db(["学生 习惯", "学习"])
    assert hits(c, "学习") == [2]


def test_english_is_stemmed_and_case_folded():
    c = fts_db(["Running the migrations", "a runner"])
    assert hits(c, "migration run") == [1]


def test_and_mode_requires_every_term():
    c = fts_db(["sqlite wal mode", "sqlite journal", "wal"])
    assert hits(c, "sqlite wal", "and") == [1]
    assert hits(c, "sqlite wal", "or") == [1, 2, 3]


def test_query_with_fts_syntax_is_quoted():
    c = fts_db(['she said "NEAR" and OR'])
    assert hits(c, 'NEAR( "OR" * ^') == [1]
    assert match_expression(query_terms("!!! ...")) is None


def test_snippet_centres_on_match():
    text = "x " * 300 + "the needle is here " + "y " * 300
    s = snippet(text, ["needle"])
    assert "needle" in s and len(s) <= 245 and s.startswith("…")


def test_camel_case_words_are_also_indexed_as_parts():
    assert camel_parts("my iPhone and getUserName, XMLHttpRequest #PlankChallenge") == [
        "i", "Phone", "get", "User", "Name", "XML", "Http", "Request", "Plank", "Challenge"]
    assert index_text("plain words") == "plain words"
    c = fts_db(["a cracked iPhone screen", "getUserName() returns None", "phone book"])
    assert hits(c, "phone") == [1, 3]
    assert hits(c, "iphone") == [1]
    assert hits(c, "user name", "and") == [2]
    assert hits(c, "getusername") == [2]


def test_camel_parts_do_not_break_phrases():
    c = fts_db(["the iPhone 13 Pro", "数据库 iPhone"])
    assert hits(c, "数据库") == [2]
    m = c.execute("SELECT rowid FROM t WHERE t MATCH ?", ('"iphone 13 pro"',)).fetchall()
    assert m == [(1,)]


def test_stop_words_are_dropped_unless_nothing_is_left():
    terms = query_terms("What was my previous goal for my Apex Legends level before I updated?")
    assert content_terms(terms) == ["previous", "goal", "apex", "legends", "level", "updated"]
    assert content_terms(query_terms("to be or not to be")) == ["to", "be", "or", "not"]
    assert content_terms(query_terms("I'm sure it's what I’m after")) == ["sure"]
    assert content_terms(query_terms("Can you suggest some tips for my garden?")) == ["garden"]


def test_long_cjk_runs_split_into_bigrams():
    assert split_cjk(["数据库迁移", "迁移", "sqlite", "猫"]) == [
        "数据", "据库", "库迁", "迁移", "sqlite", "猫"]
    c = fts_db(["数据库迁移的方案", "迁移", "数据"])
    m = match_expression(split_cjk(query_terms("数据库迁移怎么做")))
    got = [r[0] for r in c.execute("SELECT rowid FROM t WHERE t MATCH ? ORDER BY bm25(t)", (m,))]
    assert got[0] == 1 and set(got) == {1, 2, 3}
