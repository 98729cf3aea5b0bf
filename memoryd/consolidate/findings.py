"""What the day found out: outcomes the assistant reported, for the daily note.

A day's session summary lists what the user asked, decided and left open; what the
work *found* (a debugging conclusion, a tool's result, an incident) is mostly said by
the assistant: "Found it: ...", "结论：...", "root cause ...", "fixed by ...", "went from
71 to 93", "1,213,440 rows in 14 minutes", "503 for 30 minutes". Those sentences are
Q2 (worth looking up later, not standing rules): results with figures, in a turn
where a tool ran, go under `## Tool Activity`, the other conclusions under `## Topics`.
At most a few per message; questions, offers ("want me to ...?"), small talk, and
answers to small talk or to a general-knowledge question (Q3 themselves) are left out.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from memoryd.consolidate.scorer import CHATTER, FACT, GENERAL, QUESTION, REQUEST
from memoryd.summarize.extractive import is_small_talk, sentences

PER_MESSAGE = 2
ITEM_CHARS = 200
_I = re.IGNORECASE
# a sentence that reports an outcome
CONCLUSION = re.compile(
    r"^(?:found it|conclusion|summary|result|root cause|the (?:root )?cause|the fix|fix(?:ed)?|"
    r"done|turns out|it turned out)\b|\broot cause\b|\bcame from\b|\bcaused by\b|"
    r"\bturned out\b|\bwas (?:an?|the) (?:classic |real )?(?:bug|cause|problem|race|n\+1|leak)|"
    r"\bfixed (?:by|with|it)\b|\bwent from\b|\bfinished\b|\bcompleted?\b|\bsucceeded\b|"
    r"\bpassed\b|\ball green\b|\bwas down\b|\boutage\b|\brate.?limit\w*|\bflak(?:e|y)\b|"
    r"\btimed out\b|\b50[234]\b|"
    r"结论|原因|根因|来自|导致|修复|修好|解决|完成|跑完|全绿|通过|挂了|宕机|限流|超时|偶发|耗时",
    _I)
# figures a tool run reports: counts with units, durations, before -> after
FIGURE = re.compile(
    r"\d[\d,.]*\s*(?:rows?|lines?|files?|issues?|tests?|errors?|warnings?|calls?|queries|"
    r"passed|failed|skipped|ms|s\b|sec|seconds?|min|minutes?|hours?|%|MB|GB|KB|"
    r"行|条|个|次|秒|分钟|小时)|"
    r"\d\s*(?:→|->)\s*\d|\bfrom \d[\d,.]* to \d", _I)
# a sentence that explains (a cause, a fix and its effect): a finding, not a tool's result
DIAGNOSIS = re.compile(
    r"^(?:found it|that'?s it|root cause|the (?:root )?cause|(?:the )?fix)\b|"
    r"\broot cause\b|\bcame from\b|\bcaused by\b|\bturn(?:s|ed) out\b|"
    r"(?:\bwas|\bis|'s) (?:an?|the) (?:classic |real )?(?:bug|cause|problem|race|n\+1|leak)|"
    r"\bfixed (?:by|with|it)\b|原因|根因|导致|来自|修复", _I)
_OFFER = re.compile(r"^(?:want me to|shall i|should i|do you want|要不要|需要我)", _I)
_LEAD = re.compile(r"^(?:found it|conclusion|summary|result|结论|总结|结果)\s*[:：.,，]\s*", _I)


def findings(units: Sequence[Mapping[str, Any]]) -> list[tuple[str, str]]:
    """(section, text) for the outcomes the assistant reported in these units."""
    out: list[tuple[str, str]] = []
    seen: set[str] = set()
    asked_noise = False  # the answer to small talk or general knowledge is noise too
    ran = False  # a tool ran since the user last spoke: the turn reports its results
    for u in units:
        if u.get("kind") in ("tool_call", "tool_result"):
            ran = True  # and whatever the user last said, a tool run is work
            asked_noise = False
            continue
        if u.get("kind") != "message":
            continue
        if u.get("role") == "user":
            ran = False
            said = str(u.get("content") or "")
            work = bool(REQUEST.search(said) or FACT.search(said) or QUESTION.search(said))
            if is_small_talk(said) or GENERAL.search(said) or (CHATTER.search(said)
                                                                and not work):
                asked_noise = True
            elif work:
                asked_noise = False
            # else a remark on the last answer ("too long, shorter"): same subject
            continue
        if u.get("role") != "assistant" or asked_noise:
            continue
        took = 0
        for s in sentences(str(u.get("content") or "")):
            s = " ".join(s.split())
            if took >= PER_MESSAGE or is_small_talk(s) or s.endswith(("?", "？")):
                continue
            if _OFFER.match(s) or not (CONCLUSION.search(s) or FIGURE.search(s)
                                       or DIAGNOSIS.search(s)):
                continue
            text = _LEAD.sub("", s).strip()
            if len(text) < 8 or text.casefold() in seen:
                continue
            if len(text) > ITEM_CHARS:
                text = text[: ITEM_CHARS - 1].rstrip() + "…"
            seen.add(text.casefold())
            # Tool Activity is what the turn's tool runs did (figures, before and after);
            # why something happened and what fixed it is a finding
            out.append(("Tool Activity" if ran and not DIAGNOSIS.search(s) else "Topics",
                        text))
            took += 1
    return out
