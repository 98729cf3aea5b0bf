"""The daily note keeps what the work found out: outcomes the assistant reported
(conclusions, results with figures, incidents), English and Chinese; never the answer
to small talk or to a general-knowledge question, never an offer or a question."""

from __future__ import annotations

from memoryd.consolidate.candidates import note_items
from memoryd.consolidate.findings import findings


def m(role: str, text: str) -> dict:
    return {"role": role, "kind": "message", "content": text}


def ran(tool: str) -> list[dict]:
    return [{"role": "assistant", "kind": "tool_call", "content": "", "tool_name": tool},
            {"role": "tool", "kind": "tool_result", "content": "ok", "tool_name": tool}]


UNITS = [
    m("user", "The export job is slow again, can you look?"),
    *ran("bash"),
    m("assistant", "Found it: the export ran one query per row. Fixed by batching 500 rows "
                   "per insert; 9.4 s -> 0.8 s. Want me to push it?"),
    m("user", "好，顺便把数据也补一下。"),
    *ran("bash"),
    m("assistant", "结论：补数完成，共写入 52,310 行，耗时约 3 分钟。"),
    m("user", "What's the history of the Eiffel Tower? Just curious."),
    m("assistant", "It was finished in 1889 and was 300 m tall, the tallest structure then."),
    m("user", "too long, shorter"),
    m("assistant", "Finished in 1889, 300 m tall."),
    m("user", "thanks"),
    m("assistant", "You're welcome!"),
]


def test_findings_are_outcomes_with_their_section():
    got = findings(UNITS)
    assert ("Topics", "the export ran one query per row.") in got
    # what fixed it is a finding, as its cause is (two a message)
    assert ("Topics", "Fixed by batching 500 rows per insert;") in got
    assert ("Tool Activity", "补数完成，共写入 52,310 行，耗时约 3 分钟。") in got
    text = " ".join(t for _, t in got)
    assert "Eiffel" not in text and "1889" not in text  # general knowledge, and its follow-up
    assert "push it" not in text and "welcome" not in text


def test_tool_activity_is_what_tools_did():
    """Issue 27: a figure in a turn where no tool ran is not tool activity."""
    got = findings([m("user", "The terminal flickers again, why?"),
                    m("assistant", "This is 100% a **VS Code terminal bug**, not ours.")])
    assert got and all(section == "Topics" for section, _ in got), got


def test_note_items_carry_findings_besides_the_summary():
    session = {"agent": "codex", "project": "/src/shop", "summary": None, "pk": 1}
    items, _ = note_items(session, UNITS, whole_session=False)
    by = {(i.section, i.text) for i in items}
    assert any(s == "Tool Activity" and "52,310" in t for s, t in by)
    assert all(i.agent == "codex" and i.project == "shop" for i in items)
    assert not any("1889" in t for _, t in by)


def test_a_runs_results_are_tool_activity_and_why_is_a_finding():
    """Issue 27: "18 passed" after a run is what the tool did, also after a remark of the
    user's ("nice, clear enough"); the cause and the fix are findings."""
    got = findings([
        m("user", "Nice, that's clear enough for a support macro."),
        *ran("bash"),
        m("assistant", "Checkout e2e on staging: 18 passed, 1 skipped (the redirect test is "
                       "skipped because the sandbox blocks it)."),
        m("user", "the shelf page is slow, why?"),
        *ran("bash"),
        m("assistant", "That's a classic N+1: one query per shelf. 内核挂了，原因是内存不够。"),
    ])
    assert ("Tool Activity", "Checkout e2e on staging: 18 passed, 1 skipped (the redirect "
                             "test is skipped because the sandbox blocks it).") in got
    assert ("Topics", "That's a classic N+1: one query per shelf.") in got
    assert ("Topics", "内核挂了，原因是内存不够。") in got
