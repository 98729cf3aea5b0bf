import sqlite3

from memoryd.store.fts import TOKENIZER, index_text, match_expression, query_terms, snippet


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
