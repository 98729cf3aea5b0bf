"""The deterministic summarizer: sentences, small talk, one-liners, bounded recursive
summaries in the conversation's language."""

from __future__ import annotations

import json

from memoryd.summarize import extractive as x


def msg(role: str, text: str) -> dict:
    return {"role": role, "kind": "message", "content": text}


def call(name: str, args: dict, cid: str) -> dict:
    return {"role": "assistant", "kind": "tool_call", "content": f"{name}(...)",
            "tool_name": name, "tool_args": json.dumps(args), "related_id": cid}


def result(name: str, output: str, cid: str) -> dict:
    return {"role": "tool", "kind": "tool_result", "content": output, "tool_name": name,
            "related_id": cid}


def test_extractive_sentences_latin_and_cjk():
    assert x.sentences("We tried it. Did it work? Yes!\n- a bullet\n```\ncode = 1\n```") == [
        "We tried it.", "Did it work?", "Yes!", "a bullet"]
    assert x.sentences("我们先备份。然后迁移！可以吗？好；继续") == [
        "我们先备份。", "然后迁移！", "可以吗？", "好；", "继续"]


def test_extractive_small_talk():
    for t in ("ok", "OK!", "okay", "thanks", "Thanks!", "好的", "嗯嗯", "谢谢", "收到", "👍", "k"):
        assert x.is_small_talk(t), t
    for t in ("kill it", "no", "ok, now deploy it to prod", "好的，请把数据库迁移到 PostgreSQL"):
        assert not x.is_small_talk(t), t


def test_extractive_language_detection():
    assert x.language(["Let us move the database to PostgreSQL."]) == "en"
    assert x.language(["我们把数据库迁移到 PostgreSQL 吧，先做备份。"]) == "zh"
    assert x.language(["データベースを移行しましょう。"]) == "ja"
    assert x.language(["데이터베이스를 옮깁시다"]) == "ko"


def test_extractive_tool_one_liners():
    lines = "\n".join(f"{i}: text" for i in range(200))
    assert x.one_liner(result("read_file", lines, "c1"),
                       call("read_file", {"path": "src/index.ts"}, "c1")) == \
        "read_file src/index.ts → 200 lines"
    out = "Chunk ID: 1\nProcess exited with code 0\nOutput:\n" + "\n".join(["f"] * 9)
    assert x.one_liner(result("exec_command", out, "c2"),
                       call("exec_command", {"cmd": "ls -la"}, "c2")) == \
        "exec_command ls -la → exit 0, 12 lines"
    assert x.one_liner(result("bash", "Error: no such file\nmore", "c3"),
                       call("bash", {"command": "cat x"}, "c3")) == \
        "bash cat x → error: Error: no such file"
    assert x.one_liner(result("write", "Successfully wrote 10 bytes to a.txt", "c4"), None) == \
        "write → Successfully wrote 10 bytes to a.txt"
    assert x.one_liner(result("bash", "(no output)", "c5"), None) == "bash → no output"


def test_extractive_one_liner_of_a_long_reply_is_its_first_sentence():
    reply = "The migration is done and all tests pass. " + "Details follow. " * 100
    assert x.one_liner(msg("assistant", reply)) == "The migration is done and all tests pass."
    zh = "迁移已经完成，所有测试都通过了。" + "细节如下。" * 100
    assert x.one_liner(msg("assistant", zh)) == "迁移已经完成，所有测试都通过了。"


def test_extractive_summary_sections():
    units = [
        msg("user", "Can you move the cache to Redis? The current one leaks memory."),
        msg("assistant", "I looked at it. We decided to go with Redis 7 and keep the TTL at 1h."),
        call("bash", {"command": "pytest"}, "c1"), result("bash", "3 passed", "c1"),
        call("bash", {"command": "ls"}, "c2"), result("bash", "a\nb", "c2"),
        call("read_file", {"path": "cache.py"}, "c3"), result("read_file", "x", "c3"),
        msg("user", "ok"),
        msg("user", "Should we also drop the old memcached config?"),
    ]
    s = x.summarize(units)
    assert s.splitlines() == [
        "Topics: Can you move the cache to Redis?",
        "Decisions: We decided to go with Redis 7 and keep the TTL at 1h",
        "Open questions: Should we also drop the old memcached config?",
        "Tool activity: bash ×2; read_file ×1",
    ]
    assert x.summarize(units) == s  # deterministic
    assert "ok" not in s.split(": ", 1)[1]


def test_extractive_summary_in_chinese():
    units = [msg("user", "我们需要把数据库迁移到 PostgreSQL。你觉得怎么样？"),
             msg("assistant", "好的。我们决定采用 pg_dump 进行迁移，然后验证数据。"),
             msg("user", "谢谢")]
    s = x.summarize(units)
    assert s.splitlines() == ["要点：我们需要把数据库迁移到 PostgreSQL",
                              "决定：我们决定采用 pg_dump 进行迁移，然后验证数据",
                              "待解决问题：你觉得怎么样？"]


def test_extractive_summary_folds_the_previous_one_and_stays_bounded():
    previous = None
    for i in range(60):
        units = [msg("user", f"Please refactor module number {i} into smaller pieces today."),
                 msg("assistant", f"Done. We decided to keep module {i} public."),
                 call("bash", {"command": "make"}, f"c{i}"), result("bash", "ok", f"c{i}")]
        previous = x.summarize(units, previous, max_words=120)
        assert x.words(previous) <= 120
    assert "module number 59" in previous  # the newest survive
    assert "module number 0 " not in previous
    assert "bash ×60" in previous  # tool counts add up across folds


def test_extractive_nothing_worth_recording():
    assert x.summarize([msg("user", "ok"), msg("assistant", "👍")]) == "Nothing worth recording."
    assert x.summarize([msg("user", "好的"), msg("assistant", "谢谢")], lang="zh") == \
        "没有值得记录的内容。"
    # small talk after a real summary leaves it as it was
    assert x.summarize([msg("user", "thanks")], "Topics: the Redis move") == \
        "Topics: the Redis move"


def test_extractive_folds_a_model_summary_as_topics():
    s = x.summarize([msg("user", "Now add a health check endpoint to the API.")],
                    "The user moved the cache to Redis. Tests pass.")
    assert s.startswith("Topics: The user moved the cache to Redis; Tests pass; Now add")


def test_issue_27_sections_mean_what_they_say():
    units = [msg("user", "We decided to use PostgreSQL 16 for the orders service."),
             msg("assistant", "OK, new tests will use vitest. Now let's commit:"),
             msg("user", "Should we move auth tokens to JWT? Not sure yet."),
             msg("user", "我们要不要把定时任务换成 Airflow，还没定。"),
             msg("assistant", "This is 100% a **VS Code terminal bug**, see `term.ts`."),
             msg("user", "就叫 ShelfGrid，今天改掉。")]
    s = x.parse(x.summarize(units))
    # a user's decision leads: under Decisions, not lost to Topics
    assert any("PostgreSQL 16" in d for d in s["decisions"]), s
    assert not any("PostgreSQL 16" in t for t in s["topics"]), s
    assert any("ShelfGrid" in d for d in s["decisions"]), s
    # the assistant's acknowledgement and plan are not decisions
    assert not any("vitest" in d or "commit" in d for d in s["decisions"]), s
    # open questions in both languages, the undecided ones too
    assert any("JWT" in q for q in s["questions"]), s
    assert any("Airflow" in q for q in s["questions"]), s
    # tool activity only from tools; no markdown residue in items
    assert not s["tools"]
    assert not any("**" in i or "`" in i for sec in s.values() for i in sec), s


def test_decisions_and_open_questions_read_the_conversation():
    """Issue 27: "X lets you" is not "let's"; a plain answer to choices the assistant laid
    out (no question mark) is a decision; a question the assistant parks in quotes is an
    open question."""
    units = [msg("user", "People asked about imports. Goodreads lets you export a CSV. Hard?"),
             msg("assistant", 'Okay, parked: "Goodreads CSV import before the beta?"'),
             msg("user", "next: the mega menu, it is silly with 6 categories"),
             msg("assistant", "Options: a flat category bar, or a simple dropdown. The bar "
                              "keeps everything one tap away."),
             msg("user", "flat category bar. kill the mega menu")]
    s = x.parse(x.summarize(units))
    assert not any("lets you" in d for d in s["decisions"]), s
    assert any("flat category bar" in d for d in s["decisions"]), s
    assert any("Goodreads CSV import" in q for q in s["questions"]), s
