"""The deterministic summarizer: every artifact the LLM makes, made without one.

Used when no model is configured, there is no key, the daily budget is spent, LLM use
is paused, or a model answered with something unusable. Pure functions over unit
dicts (`role`, `kind`, `content`, `tool_name`, `tool_args`), any language: sentences
split on `. ! ? ;` and on `。！？；`, labels in the conversation's language.

A session summary is a few labelled lines (topics, decisions, open questions, tool
activity); folding in the previous summary merges its lines, newest items kept when
the word budget is reached, so the result is recursive and bounded like the LLM's.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Iterable, Mapping
from typing import Any

VERSION = "extractive-1"
MADE_BY = "extractive"

_CJK = "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"
_KANA = "\u3040-\u30ff"
_HANGUL = "\uac00-\ud7af"
_CJK_CHAR = re.compile(f"[{_CJK}{_KANA}{_HANGUL}]")
_LETTER = re.compile(r"[^\W\d_]")
_FENCE = re.compile(r"```.*?(?:```|\Z)", re.DOTALL)
_BOUNDARY = re.compile(r"(?<=[。！？；])|(?<=[.!?;])\s+")
_WS = re.compile(r"\s+")
_LATIN_WORD = re.compile(r"[^\W_]+", re.UNICODE)

SMALL_TALK_MAX = 8
LANGUAGE_SAMPLE = 4000  # letters looked at to tell the language
_SMALL_TALK = ("ok", "okay", "thanks", "thank", "thx", "cool", "nice", "great", "got it",
               "好的", "好", "嗯", "谢谢", "多谢", "收到", "哈哈", "行", "👍", "🙏", "👌", "ありがとう")
_SMALL_TALK_EXACT = {"k", "ty", "kk", "np"}

_DECISION = re.compile(
    r"\b(?:decided|decide to|decision|let['’]s|^lets|let us|we will|we'll|going with|go with|"
    r"agreed|"
    r"settled on|chose|will use|switch(?:ed)? to|the plan is|go ahead with)\b"
    r"|决定|确定|采用|选定|改用|就用|定了|同意|就叫|那就|就这么|就定|^就\S{1,12}吧|決定|決めた|採用|결정",
    re.IGNORECASE)
# said of a question still open: "not sure yet", "还没定", "要不要 ..."
_UNDECIDED = re.compile(
    r"\bnot sure(?: yet)?\b|\bhaven'?t (?:decided|made up)\b|\bdon'?t know (?:yet|whether|if)\b|"
    r"\bopen question\b|\bundecided\b|\bdecide later\b|"
    r"还没定|没想好|想清楚|之后再定|以后再定|再讨论|要不要|待定",
    re.IGNORECASE)
_ACK_OR_PLAN = re.compile(
    r"(?:ok(?:ay)?|sure|got it|noted|understood|right|alright|will do|done|great|good)\b|"
    r"(?:now |next,? |then |first,? )?(?:let'?s|let me|let us|i'?ll|i will|i'?m going to)\b|"
    r"(?:好的?|收到|明白|了解|行|可以)[，,。！!]|(?:接下来|现在|那)?(?:我来|我先|我们先|让我)",
    re.IGNORECASE)
_MARKUP = re.compile(r"\*\*|__|`+")
# the assistant lays out choices without asking ("Options: a flat bar, or a dropdown."):
# the user's plain answer is a decision, as an answer to "X or Y?" is
_OPTIONS = re.compile(r"\b(?:options?|alternatives?|either)\b|两种|几种|一是|方案[一二12]|要么",
                      re.IGNORECASE)

# a question that asks for something to be done is a request (a topic), not an open question
_REQUEST = re.compile(r"(?:can|could|would|will) you\b|please\b|你能|能不能|能否|请|帮我|麻烦",
                      re.IGNORECASE)
_EXIT = re.compile(r"(?:exit(?:ed)? (?:with )?code|exit code|exit status|returncode)[:=\s]*(-?\d+)",
                   re.IGNORECASE)
_ERROR = re.compile(r"^\s*(?:error|fatal|traceback|exception)\b|^\s*\{?\s*\"?status\"?\s*:\s*"
                    r"\"?error", re.IGNORECASE)
_ARG_KEYS = ("command", "cmd", "file_path", "path", "filePath", "dir_path", "pattern", "query",
             "url", "description", "prompt", "title", "action", "name")

LABELS: dict[str, dict[str, str]] = {
    "en": {"topics": "Topics", "decisions": "Decisions", "questions": "Open questions",
           "tools": "Tool activity", "nothing": "Nothing worth recording.", "sep": "; ",
           "colon": ": "},
    "zh": {"topics": "要点", "decisions": "决定", "questions": "待解决问题", "tools": "工具调用",
           "nothing": "没有值得记录的内容。", "sep": "；", "colon": "："},
    "ja": {"topics": "要点", "decisions": "決定", "questions": "未解決の質問", "tools": "ツール",
           "nothing": "記録すべき内容はありません。", "sep": "；", "colon": "："},
    "ko": {"topics": "요점", "decisions": "결정", "questions": "미해결 질문", "tools": "도구",
           "nothing": "기록할 내용이 없습니다.", "sep": "; ", "colon": ": "},
}
NOTHING = {v["nothing"] for v in LABELS.values()}
SECTIONS = ("topics", "decisions", "questions", "tools")


# -- language and text ---------------------------------------------------------------------


def language(texts: Iterable[str]) -> str:
    """"zh", "ja", "ko" when CJK script is at least a fifth of the letters, else "en"
    (the extractive labels' language; the LLM is told to follow the conversation)."""
    letters = cjk = kana = hangul = 0
    for t in texts:
        if letters > LANGUAGE_SAMPLE:
            break
        t = t[:LANGUAGE_SAMPLE]
        letters += len(_LETTER.findall(t))
        for ch in _CJK_CHAR.findall(t):
            cjk += 1
            if "\u3040" <= ch <= "\u30ff":
                kana += 1
            elif "\uac00" <= ch <= "\ud7af":
                hangul += 1
    if not letters or cjk / letters < 0.2:
        return "en"
    if hangul > cjk / 2:
        return "ko"
    if kana > cjk / 10:
        return "ja"
    return "zh"


def words(text: str) -> float:
    """Length in words; a CJK character counts as two thirds of one."""
    cjk = len(_CJK_CHAR.findall(text))
    latin = len(_LATIN_WORD.findall(_CJK_CHAR.sub(" ", text)))
    return latin + cjk / 1.5


def has_words(text: str) -> bool:
    return _LETTER.search(text) is not None


def squash(text: str) -> str:
    return _WS.sub(" ", text).strip()


def clip(text: str, limit: int) -> str:
    text = squash(text)
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def _item(sentence: str, limit: int) -> str:
    """A sentence as a summary item: clipped, without markdown emphasis or code marks
    and without its closing `.`/`;`."""
    return clip(_MARKUP.sub("", sentence), limit).rstrip(" .;。；")


def sentences(text: str) -> list[str]:
    """Sentences of prose: code blocks dropped, markdown bullets and headings stripped,
    split at line ends and at sentence punctuation (Latin and CJK)."""
    out = []
    for line in _FENCE.sub("\n", text).splitlines():
        line = line.strip().lstrip("-*#>•|0123456789. ").strip()
        if not line:
            continue
        for s in _BOUNDARY.split(line):
            s = s.strip()
            if len(s) >= 2 and _LETTER.search(s):
                out.append(s)
    return out


def first_sentence(text: str, limit: int = 160) -> str:
    ss = sentences(text)
    return clip(ss[0] if ss else text, limit)


def is_small_talk(text: str) -> bool:
    t = text.strip().lower().rstrip(".!。！~ ")
    if not t:
        return True
    if len(t) > SMALL_TALK_MAX:
        return False
    return t in _SMALL_TALK_EXACT or t.startswith(_SMALL_TALK)


# -- one-liners ----------------------------------------------------------------------------


def key_argument(tool_args: str | None, limit: int = 80) -> str:
    """The argument that says what a tool call did: its command, path, pattern, query..."""
    if not tool_args:
        return ""
    try:
        args = json.loads(tool_args)
    except ValueError:
        return ""
    if isinstance(args, str):
        return clip(args, limit)
    if not isinstance(args, dict):
        return ""
    for key in _ARG_KEYS:
        v = args.get(key)
        if isinstance(v, list):
            v = " ".join(str(x) for x in v)
        if isinstance(v, str) and v.strip():
            v = squash(v)
            if key in ("file_path", "path", "filePath", "dir_path") and len(v) > limit:
                return "…" + v[-(limit - 1):]
            return clip(v, limit)
    return ""


def one_liner(unit: Mapping[str, Any], call: Mapping[str, Any] | None = None) -> str:
    """One line saying what a unit is, e.g. `read_file src/index.ts → 200 lines`,
    `exec_command ls -la → exit 0, 12 lines`, or a reply's first sentence."""
    kind, content = unit.get("kind"), str(unit.get("content") or "")
    if kind == "tool_result":
        name = unit.get("tool_name") or (call or {}).get("tool_name") or "tool"
        arg = key_argument((call or {}).get("tool_args"))
        return clip(f"{name} {arg}".strip() + " → " + _result_facts(content), 240)
    if kind == "tool_call":
        name = unit.get("tool_name") or "tool"
        arg = key_argument(unit.get("tool_args"))
        lines = content.count("\n") + 1
        return clip(f"{name} {arg}".strip() + (f" ({lines} lines)" if lines > 3 else ""), 240)
    line = first_sentence(content)
    return f"compaction: {line}" if kind == "compaction" else line


def _result_facts(content: str) -> str:
    text = content.strip()
    if not text or text == "(no output)":
        return "no output"
    lines = text.splitlines()
    m = _EXIT.search(text[:2000])
    if _ERROR.search(lines[0]) and (not m or m.group(1) != "0"):
        return "error: " + clip(lines[0], 100)
    facts = []
    if m:
        facts.append(f"exit {m.group(1)}")
    if len(lines) <= 2 and not m:
        return clip(lines[0], 120)
    facts.append(f"{len(lines)} lines")
    return ", ".join(facts)


# -- session summaries ---------------------------------------------------------------------


def summarize(units: list[Mapping[str, Any]], previous: str | None = None, *,
              max_words: int = 200, lang: str | None = None) -> str:
    """A bounded summary of `units` folded into `previous` (an extractive summary or
    any text, e.g. an LLM summary made before the budget ran out)."""
    lang = lang or language(str(u.get("content") or "") for u in units
                            if u.get("kind") == "message")
    new = _collect(units)
    old = parse(previous) if previous else _empty()
    if not any(new.values()):
        return previous if previous else LABELS[lang]["nothing"]
    merged: dict[str, list[str]] = {k: _dedupe(old[k] + new[k]) for k in SECTIONS[:3]}
    tools = Counter(_parse_tools(old["tools"])) + Counter(_parse_tools(new["tools"]))
    merged["tools"] = [f"{name} ×{n}" for name, n in sorted(tools.items(), key=lambda x: -x[1])]
    return _render(_fit(merged, lang, max_words), lang)


def _empty() -> dict[str, list[str]]:
    return {k: [] for k in SECTIONS}


def _collect(units: list[Mapping[str, Any]]) -> dict[str, list[str]]:
    out = _empty()
    tools: Counter[str] = Counter()
    called: set[str] = set()
    asked: list[str] = []  # user messages opening with a question
    offered = False  # the assistant's last message ended asking the user to choose
    for u in units:
        kind, role, content = u.get("kind"), u.get("role"), str(u.get("content") or "")
        if kind == "tool_call":
            tools[str(u.get("tool_name") or "tool")] += 1
            if u.get("related_id"):
                called.add(str(u["related_id"]))
        elif kind == "tool_result":
            if not u.get("related_id") or str(u["related_id"]) not in called:
                tools[str(u.get("tool_name") or "tool")] += 1
        elif kind == "compaction":
            out["topics"] += [_item(s, 140) for s in sentences(content)[:2]]
        elif kind == "message" and role in ("user", "assistant") and not is_small_talk(content):
            ss = sentences(content)
            ss = [x for x in ss if not is_small_talk(x)]
            # what the user decided leads the message: a decision, not also a topic; so
            # is a plain answer to the assistant's "X or Y?" / "shall I ...?"
            decided = role == "user" and bool(ss) and (
                _decision(ss[0]) or any(_decision(x) for x in ss[1:3])
                or (offered and not _is_question(ss[0]) and not _UNDECIDED.search(content)))
            if decided and not _decision(ss[0]):
                out["decisions"].append(_item(ss[0], 160))
            if role == "assistant":
                offered = bool(ss) and (_is_question(ss[-1]) or bool(_OPTIONS.search(content)))
            elif role == "user":
                offered = False
            undecided = role == "user" and bool(ss) and bool(_UNDECIDED.search(ss[0]))
            if (role == "user" and ss and not decided and not undecided
                    and (not _is_question(ss[0]) or _REQUEST.match(ss[0]))):
                out["topics"].append(_item(ss[0], 140))
            elif role == "user" and ss and not decided and not undecided:
                asked.append(_item(ss[0], 160))
            for i, s in enumerate(ss):
                # the assistant's "OK, ..." and "Now let's ..." acknowledge or plan: not
                # decisions
                if _decision(s) and (role == "user" or not _ACK_OR_PLAN.match(s)):
                    out["decisions"].append(_item(s, 160))
                elif role == "user" and _UNDECIDED.search(s) and not _is_question(s):
                    q = next((x for x in reversed(ss[:i]) if _is_question(x)), s)
                    out["questions"].append(_item(q, 160))
                elif (_is_question(s) and not (role == "user" and i == 0 and _REQUEST.match(s))
                      and (role == "user" or len(ss) <= 3 or i == len(ss) - 1)):
                    out["questions"].append(_item(s, 160))
    if not out["topics"] and asked:  # the user only asked: the first question is the topic
        out["topics"].append(asked[0])
        out["questions"].remove(asked[0])
    if not out["topics"]:  # no user requests: the assistant's opening lines say what it did
        for u in units:
            if u.get("kind") == "message" and u.get("role") == "assistant":
                ss = [x for x in sentences(str(u.get("content") or "")) if not is_small_talk(x)]
                if ss:
                    out["topics"].append(_item(ss[0], 140))
            if len(out["topics"]) >= 3:
                break
    out["decisions"] = out["decisions"][-6:]
    out["questions"] = _dedupe(out["questions"])[-4:]
    out["tools"] = [f"{n} ×{c}" for n, c in tools.most_common()]
    return out


def _decision(s: str) -> bool:
    return bool(_DECISION.search(s)) and not _is_question(s) and not _UNDECIDED.search(s)


def _is_question(s: str) -> bool:
    """Ends asking, inside quotes too ('parked: "CSV import before the beta?"')."""
    return s.rstrip("\"'”’」』)） ").endswith(("?", "？"))


def _dedupe(items: list[str]) -> list[str]:
    seen: set[str] = set()
    out = []
    for item in items:
        key = squash(item).lower().rstrip(" .;。；")
        if key and key not in seen:
            seen.add(key)
            out.append(item)
    return out


def _parse_tools(items: list[str]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for item in items:
        name, _, n = item.rpartition(" ×")
        if name and n.isdigit():
            counts[name] = counts.get(name, 0) + int(n)
    return counts


def _fit(sections: dict[str, list[str]], lang: str, max_words: int) -> dict[str, list[str]]:
    """Drop the oldest items (topics first, then questions, then decisions; the tool
    list loses its rarest tools) until the rendered summary fits `max_words` (a
    rendering's length is the sum of its items' and labels' lengths)."""
    s = {k: list(v) for k, v in sections.items()}
    cost = {k: [words(x) for x in v] for k, v in s.items()}
    label = {k: words(LABELS[lang][k]) for k in SECTIONS}
    total = sum(sum(cost[k]) + (label[k] if s[k] else 0) for k in SECTIONS)
    order = (("topics", 2), ("tools", 4), ("questions", 1), ("decisions", 2), ("topics", 1),
             ("questions", 0), ("tools", 1), ("decisions", 1), ("topics", 0), ("decisions", 0))
    for key, floor in order:
        while total > max_words and len(s[key]) > floor:
            i = -1 if key == "tools" else 0
            s[key].pop(i)
            total -= cost[key].pop(i) + (0 if s[key] else label[key])
    return s


def _render(s: dict[str, list[str]], lang: str) -> str:
    lab = LABELS[lang]
    lines = [f"{lab[k]}{lab['colon']}{lab['sep'].join(s[k])}" for k in SECTIONS if s[k]]
    return "\n".join(lines) if lines else lab["nothing"]


def parse(summary: str) -> dict[str, list[str]]:
    """The sections of an extractive summary (any language); other text (an LLM
    summary) becomes topics, one per sentence."""
    out = _empty()
    if summary.strip() in NOTHING:
        return out
    by_label = {lab[k]: k for lab in LABELS.values() for k in SECTIONS}
    for line in summary.splitlines():
        line = line.strip()
        if not line:
            continue
        for label, key in by_label.items():
            for colon in (": ", "："):
                if line.startswith(label + colon):
                    body = line[len(label) + len(colon):]
                    out[key] += [x.strip() for x in re.split(r"; |；", body) if x.strip()]
                    break
            else:
                continue
            break
        else:
            out["topics"] += [_item(s, 160) for s in sentences(line)]
    return out
