"""The deterministic admission scorer (no model): which sentences of a day are worth
long-term memory, in English and Chinese.

Each user sentence gets a score from signal families: explicit requests ("remember",
"from now on", "记住", "以后") and standing rules ("always", "never", "统一", "别") and
stated preferences and environment or project facts score up; transient states
("today", "down", "限流"), questions, one-off requests and small talk score down.
Items at or above `Q1_MIN` are Q1 (MEMORY.md); the rest are left to the daily note
(Q2) or dropped (Q3). Also here: the token features behind similarity, and the change
markers that make a new item supersede an old one.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field

from memoryd.consolidate import signals, subjects
from memoryd.summarize.extractive import is_small_talk, sentences

Q1_MIN = 3
PASTED_CHARS, PASTED_LINES = 800, 8
# signals of a standing rule, preference or fact; a sentence with none is not Q1 alone
STRONG = frozenset({"explicit", "rule", "preference", "convention", "goal", "subject",
                    "repeat", "lead", "state"})  # a user message this long is pasted material
ITEM_CHARS = 220

_I = re.IGNORECASE
EXPLICIT = re.compile(
    r"\bremember(?: that)?\b|\bkeep in mind\b|\bfrom now on\b|\bgoing forward\b|"
    r"\bfor the record\b|\bfrom today\b|\bnote that\b|\bfyi\b|"
    r"记住|记一下|记得|以后|今后|往后|从现在开始|从今天起|从今以后|今后", _I)
RULE = re.compile(
    r"\balways\b|\bnever\b|\bevery time\b|\beverywhere\b|\bby default\b|\bdon'?t\b|"
    r"\bdo not\b|\bno more\b|\bonly (?:use|through|changes|via)\b|\bmust\b|\bshould always\b|"
    r"统一|一律|不要|别用|别再|别写|不许|禁止|永远|总是|始终|都用|全用|只用|必须|不准|作废", _I)
PREF = re.compile(
    r"\bI (?:prefer|want|like|need|use|work|always|never)\b|\bI'?d rather\b|\bI'?m on\b|"
    r"\bI'?m using\b|\bmy (?:setup|machine|laptop|mac)\b|\bwe use\b|\bwe only\b|"
    r"我习惯|我喜欢|我希望|我偏好|我一般|我们用|尽量", _I)
FACT = re.compile(
    r"\b(?:macOS|Linux|Windows|Ubuntu|CentOS|Debian|Fedora|Apple Silicon|M[1-4]|Homebrew)\b|"
    r"\b(?:Python|Node|Java|Go|Ruby|PHP|Postgres(?:QL)?|MySQL|Redis|ClickHouse|SQLite)\b|"
    r"\b\d+\.\d+\b|(?:^|\s)/(?:opt|usr|home|etc|var|srv)/|\bserver\b|\bdeploy|\bdatabase\b|"
    r"\bDB\b|\bprod(?:uction)?\b|\bregion\b|\bcron(?:tab)?\b|\bthe goal\b|\bdeadline\b|"
    r"\bour (?:tests|app|db|stack|api|repo|codebase|team)\b|\bwe (?:deploy|run|talk|store)\b|"
    r"\bcodebase\b|\btests? (?:are|run)\b|\bruns? on\b|\blives? in\b|"
    r"服务器|部署|数据库|环境|生产|目标|项目|路径|版本|上线|团队|数据源|写进|代码|测试", _I)
TRANSIENT = re.compile(
    r"\btoday\b|\btonight\b|\bthis (?:morning|afternoon|evening|week)\b|\bright now\b|"
    r"\bat the moment\b|\bfor now\b|\byesterday\b|\btomorrow\b|\bdown\b|\boutage\b|"
    r"\b50[0-9]\b|\brate.?limit|\bflak(?:y|ey|ily|iness)\b|\btimed? ?out\b|\bbroke\b|"
    r"\bfailing\b|\berror\b|"
    r"\bbug\b|\bcrash\w*|报错|错误|"
    r"今天|今晚|今早|明天|昨天|前天|刚才|刚刚|现在|这会儿|暂时|先不|目前|限流|挂了|超时|宕机|"
    r"下午|上午", _I)
UNDECIDED = re.compile(
    r"\bopen question\b|\bnot sure\b|\bhaven'?t (?:made up|decided)\b|\bdon'?t know yet\b|"
    r"\bundecided\b|\bdecide later\b|\blater\b|没想清楚|还没定|没定|先记着|再讨论|再说|"
    r"再决定|要不要", _I)
REQUEST = re.compile(
    r"^(?:can|could|would|will) you\b|\bshow me\b|\blet'?s\b|\bplease (?:check|look|run|show|"
    r"fix|draft|ping|add|do|make)\b|\btake a look\b|\bcan you\b|帮我|看一下|看看|跑一下|查查|"
    r"给我|拉一下|顺便", _I)
QUESTION = re.compile(r"[?？]\s*$|^(?:what|why|how|who|which)\b|吗[。？?]?$", _I)
CHATTER = re.compile(
    r"\b(?:lol|haha|thanks|thank you|good night|morning|hey|hi|hello|random question|trivia|"
    r"fun|concert|weekend|lunch|dinner|recipe)\b|哈哈|谢谢|谢啦|晚安|早[。！]|吃|周末|拉面|演唱会",
    _I)
GOAL = re.compile(
    r"\bthe goal\b|\bour goal\b|\bwe'?re aiming\b|\bdeadline\b|\blaunch date\b|"
    r"\bdata source\b|\bbackground\b|\bcontext for\b|目标是|背景|数据源|截止", _I)
CONVENTION = re.compile(
    r"\b(?:in|use|write) (?:English|Chinese)\b|\b(?:format|style|convention|naming|exports?)\b|"
    r"用(?:中文|英文)|格式|风格|命名|规范|注释|日志", _I)
GENERAL = re.compile(
    r"\bexplain\b|\bexplanation\b|\bbasic question\b|\btrivia\b|\brandom question\b|"
    r"\bhistory of\b|\bwhat'?s (?:it|the difference)\b|科普|讲讲|解释一下|是怎么算的|"
    r"什么意思|哪一年", _I)
REPEAT = re.compile(
    r"\bagain\b|\bI (?:told|said) (?:you|this)\b|\blast time\b|\bas I said\b|\bonce more\b|"
    r"\balready (?:said|told)\b|说过|上次|又|再说一遍|一再", _I)
CHANGE = re.compile(
    r"\bfrom now on\b|\bfrom today\b|\bno longer\b|\binstead of\b|\bmoving (?:\w+ )*?off\b|"
    r"\bswitch(?:ing|ed)? (?:to|from)\b|\bmigrat\w+ (?:to|from|off)\b|\breplac\w+\b|"
    r"\bgoes away\b|\bnot .{1,40} anymore\b|\bscrap\b|\bchange of plan\b|"
    r"从现在开始|从今天起|作废|改成|改为|换成|改用|不再|之前说的", _I)
FILLER = re.compile(
    r"^(?:(?:ok(?:ay)?|good|great|nice|cool|yes|yep|yeah|no|nope|right|sure|agreed|also|and|"
    r"so|but|actually|again|stop|btw|fyi|hmm|well|alright|all right|one more thing|"
    r"another thing|oh|k|"
    r"remember(?: that)?|keep in mind(?: that)?|note that|for the record|please|pls|"
    r"for context|some context|just so you know|heads.?up|reminder(?: to (?:both of )?us)?)"
    r"\b[,.!:;—-]?\s*)+|"
    r"^(?:(?:好的?|可以|行|嗯|对|不行|另外|还有|对了|顺便|然后|有个变化|记住(?:一点)?|提醒一下|"
    r"跟你同步一下|同步一下|通知一下|说一下|先说|补充一下|背景补充一下|作废|第[一二三四五六七八九十])"
    r"[，,。：:！!、]?\s*)+", _I)
_LEAD_IN = re.compile(r"^[^:：/\d`]{0,40}?(?:context|background|for the record|fyi|note|btw|"
                      r"heads.up|reminder|rule|constraint|背景|情况|这块|交代|补充|提醒|规矩)"
                      r"[^:：/\d`]{0,30}?[:：]\s*", _I)
_FIRST_PERSON = re.compile(r"\bI\b|\bI'?m\b|\bmy\b|\bme\b|我(?!们)", _I)
_WE = re.compile(r"\bwe\b|\bour\b|\bus\b|\bthis (?:codebase|project|repo)\b|我们|项目|团队", _I)

_CJK = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]+")
_WORD = re.compile(r"[a-z0-9][a-z0-9_.+#/-]*[a-z0-9+#]|[a-z0-9]", _I)
_STOP = frozenset(
    "the a an and or but to of in on at for with by is are was were be been it this that "
    "these those we our you your i my me as from so if then than not no do does did have "
    "has had will would can could should just also all any some only into out up about "
    "there here what which who when where why how its it's they them their please use "
    "using used always never don't dont".split())
_CJK_STOP = frozenset("一下 一个 这个 那个 我们 你们 他们 就是 不是 还是 可以 然后 所以 因为 但是 "
                      "已经 现在 今天 的话 什么 怎么 这种 那种 上面 下面".split())


@dataclass
class Scored:
    text: str
    score: int
    reasons: list[str] = field(default_factory=list)
    repeat: bool = False
    change: bool = False
    user_wide: bool = False

    @property
    def q1(self) -> bool:
        return self.score >= Q1_MIN


def clean_item(sentence: str) -> str:
    s = bare = " ".join(sentence.split())
    for _ in range(3):
        t = FILLER.sub("", s).strip()
        if t == s:
            break
        s = t
    s = s.strip(" -–—,，;；")
    lead = _LEAD_IN.match(s)
    if lead and len(s) - lead.end() >= 20:  # "Some context: X", "背景：X" -> X
        s = s[lead.end():].strip()
    # "Actually, from now on" -> "From now on"
    if s != bare and s[:1].islower() and s[1:2].islower():
        s = s[0].upper() + s[1:]
    if len(s) > ITEM_CHARS:
        s = s[: ITEM_CHARS - 1].rstrip() + "…"
    return s.replace("|", "/").replace("；", "; ")


def score(sentence: str, *, ack: str | None = None) -> Scored:
    """The sentence's weight as a long-term memory, from the signals it carries (and
    `ack`, the assistant's next turn): importance points, `Q1_MIN` and up is Q1."""
    text = clean_item(sentence)
    s = " ".join(sentence.split())
    out = Scored(text, 0)
    if len(text) < 4 or is_small_talk(text):
        out.score, out.reasons = -9, ["small talk"]
        return out
    if signals.UNDECIDED.search(s):
        out.score, out.reasons = -1, ["undecided: an open question for the daily note"]
        return out
    x = signals.read(s, ack=ack)
    logit = weigh(x)
    strong = STRONG & set(x)
    if (strong == {"state"} and not {"entity", "subject"} & set(x)
            and not signals.STATE.search(signals.VAGUE_STATE.sub(" ", s))):
        strong = set()  # "we have link text ...", "this is a big change": a state of what?
    if strong == {"convention"} and "request" in x and not {"entity", "subject"} & set(x):
        strong = set()  # "update py with one liner comment": a task that names a comment
    if not strong or signals.OPENER.search(text) and "subject" not in x:
        # a prohibition, a name or a state alone, an opinion ("i think ...") or a
        # sentence pointing back at the conversation ("It's in the Pictures folder"):
        # not a standing rule said once (a correction said again is caught by
        # consolidate.recurrence)
        out.score = min(Q1_MIN - 1, Q1_MIN + math.floor(2 * logit))
        out.reasons = ["no sign of a standing rule, preference or fact"
                       if not strong else "an opinion or a pointer back at the "
                       "conversation, not a standing rule"] + [
            f"{signals.WORDS.get(n, n)}" for n in sorted(x)]
        out.repeat = "repeat" in x
        out.change = "change" in x
        return out
    lasting = {"explicit", "rule", "preference", "convention", "change", "goal"}
    if "decision" in x and not lasting & set(x) and not subjects.subjects(s):
        # "we decided to store the ISBN as a string": the day's decision, not the stack's
        out.score = min(Q1_MIN - 1, Q1_MIN + math.floor(2 * logit))
        out.reasons = ["a decision about the work at hand: for the daily note"]
        return out
    out.score = Q1_MIN + math.floor(2 * logit)
    parts = sorted(((WEIGHTS.get(n, 0.0) * v, n) for n, v in x.items()), key=lambda p: -abs(p[0]))
    out.reasons = [f"{signals.WORDS.get(n, n)} {v:+.1f}" for v, n in parts if abs(v) >= 0.05]
    out.repeat = "repeat" in x
    out.change = "change" in x or bool(CHANGE.search(s))
    out.user_wide = bool(_FIRST_PERSON.search(s)) and not _WE.search(s)
    return out


# what redaction left in place of a secret (memoryd.redact): such a sentence never
# becomes an item, even with the secret gone
SECRET = re.compile(r"\[REDACTED[^\]]*\]|\[private\]")


def candidates(message: str, dropped: list[dict[str, str]] | None = None, *,
               ack: str | None = None) -> list[Scored]:
    """The Q1-worthy sentences of one user message (possibly none); the others, but
    small talk, are added to `dropped` with the reason (below threshold, secret).
    `ack`: the assistant's next turn."""
    out = []
    # what a user says to remember is said, not pasted: the sentences of a long pasted
    # text (a prompt template, a log, a document) are not candidates of their own
    long = pasted(message)
    for sent in sentences(message):
        sc = score(trim(sent), ack=ack)
        standing = signals.EXPLICIT.search(sent)
        if sc.q1 and not standing and re.search(r"[?？]\s*$", sc.text):
            sc.score = Q1_MIN - 1
            sc.reasons = ["a question, not a statement to remember"]
        if sc.q1 and not standing and (long or signals.QUOTED.search(sc.text)):
            sc.score = Q1_MIN - 1
            sc.reasons = ["part of a pasted text or a quoted conversation, not said to remember"]
        elif sc.q1 and not standing and not signals.RULE.search(sent) and (
                signals.TASK.search(sc.text)):
            sc.score = Q1_MIN - 1
            sc.reasons = ["a task handed over now, not a standing rule"]
        if not sc.text:
            continue
        if sc.q1 and not SECRET.search(sent):
            out.append(sc)
        elif dropped is not None and sc.score > -9:
            dropped.append(drop(sc))
    return out


def pasted(message: str) -> bool:
    """A long pasted text (a prompt template, a log, a document), not something said."""
    return len(message) > PASTED_CHARS and message.count("\n") >= PASTED_LINES


_CLAUSE = re.compile(r"(?<=[，,；;])\s*")


def trim(sentence: str) -> str:
    """The sentence without the clauses that ask for something now or ask a question
    ("..., 你改的时候顺手看一眼 ...", "..., can you check it"): a fact said in passing
    while asking for a task is still a fact."""
    parts = [p for p in _CLAUSE.split(sentence) if p.strip()]
    if len(parts) < 2:
        return sentence
    keep = [p for p in parts if not (signals.REQUEST.search(p.strip())
                                      or re.search(r"[?？]\s*$|有没有|吗[。？?]?$", p))]
    if not keep or len(keep) == len(parts):
        return sentence
    return "".join(keep).rstrip(" ，,；;") + ("。" if _CJK.search(keep[-1]) else ".")


def drop(sc: Scored) -> dict[str, str]:
    if SECRET.search(sc.text):
        return {"item": sc.text, "reason": "secret",
                "why": "holds a redacted secret: never written to memory"}
    return {"item": sc.text, "reason": "below threshold",
            "why": f"score {sc.score} < {Q1_MIN}" + (
                f" ({', '.join(sc.reasons)})" if sc.reasons else "")}


def noise(text: str) -> bool:
    """Q3 for a daily note: small talk, chatter, or a question answered from general
    knowledge (no project words in it)."""
    core = re.sub(r"[\W_]+", "", text)
    short = len(core) < (4 if _CJK.search(core) else 8)
    if short or is_small_talk(text) or CHATTER.search(text) or GENERAL.search(text):
        return True
    return bool(QUESTION.search(text)) and not (FACT.search(text) or UNDECIDED.search(text)
                                                or _WE.search(text) or REQUEST.search(text))


def features(text: str) -> set[str]:
    """Latin words and numbers (stop words out) and CJK character bigrams."""
    low = text.casefold()
    feats = {w for w in _WORD.findall(low) if w not in _STOP}
    for run in _CJK.findall(low):
        if len(run) == 1:
            feats.add(run)
        feats.update(b for b in (run[i:i + 2] for i in range(len(run) - 1))
                     if b not in _CJK_STOP)
    return feats


def similarity(a: str | set[str], b: str | set[str]) -> float:
    """Dice coefficient of the two texts' features (0..1)."""
    fa = features(a) if isinstance(a, str) else a
    fb = features(b) if isinstance(b, str) else b
    if not fa or not fb:
        return 0.0
    return 2 * len(fa & fb) / (len(fa) + len(fb))


def overlap(a: str | set[str], b: str | set[str]) -> float:
    """Share of the smaller text's features found in the other (0..1)."""
    fa = features(a) if isinstance(a, str) else a
    fb = features(b) if isinstance(b, str) else b
    if not fa or not fb:
        return 0.0
    return len(fa & fb) / min(len(fa), len(fb))


def distinctive(text: str | set[str]) -> set[str]:
    """Names, versions and paths: the Latin features with a digit, a dot, a slash, or
    longer than three letters."""
    f = features(text) if isinstance(text, str) else text
    return {w for w in f if w.isascii() and (any(c.isdigit() or c in "./-_" for c in w)
                                             or len(w) > 3)}


# fitted by bench/admission_fit.py on the labelled admission sets (dev, dev-b, heldout-c)
WEIGHTS: dict[str, float] = {
    "explicit": 1.85,
    "convention": 1.68,
    "state": 1.64,
    "repeat": 1.63,
    "preference": 1.60,
    "subject": 1.57,
    "rule": 1.47,
    "goal": 1.23,
    "chatter": -1.07,
    "lead": 1.04,
    "observation": -1.02,
    "entity": 0.92,
    "one_off": -0.91,
    "prohibit": 0.83,
    "change": 0.82,
    "general": -0.75,
    "short": -0.73,
    "bias": -0.70,
    "report": -0.49,
    "hedge": -0.46,
    "acknowledged": -0.32,
    "decision": 0.31,
    "question": -0.25,
    "request": -0.22,
}


def signals_of(sentence: str, *, ack: str | None = None) -> dict[str, float]:
    return signals.read(sentence, ack=ack)


def weigh(x: dict[str, float], w: dict[str, float] | None = None) -> float:
    w = WEIGHTS if w is None else w
    return w.get("bias", 0.0) + sum(w.get(n, 0.0) * v for n, v in x.items())
