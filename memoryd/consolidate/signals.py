"""What a user's sentence says about itself, read in its conversation: the signals the
deterministic admission weighs (consolidate.scorer), in English and Chinese.

Each signal is a form of speech, not a topic: who is speaking and to whom (a first-person
preference, a team decision, a standing rule, a statement of how things are), against
what marks a passing remark (a hedge, a question, a bug observation, a one-off task with
its scope: "today", "this time", "look into ..."). One signal comes from the
conversation rather than the sentence: the assistant's next turn taking it as a lasting
instruction ("Noted, from now on I'll ...", "明白，以后 ..."). The weights live in
scorer.WEIGHTS, fitted on labelled sets (bench/admission_fit.py); here only the reading.
"""

from __future__ import annotations

import re

from memoryd.consolidate.subjects import subjects

_I = re.IGNORECASE

# (name, words a user understands in `memory why`, pattern)
EXPLICIT = re.compile(
    r"\bremember(?: that)?\b|\bkeep in mind\b|\bfrom now on\b|\bgoing forward\b|"
    r"\bfor the record\b|\bnote that\b|\bfor future reference\b|\bin future\b|"
    r"\bfrom here on\b|"
    r"记住|记一下|记得|以后|今后|往后|从现在开始|从今天起|从今以后|规矩", _I)
RULE = re.compile(
    r"\balways\b|\bnever\b|\bevery (?:time|single)\b|\bevery\b|\beverywhere\b|"
    r"\bby default\b|\bmust(?:n'?t)?\b|\bonly\b|\bno\s+\w+(?:\s+\w+)?,?\s+ever\b|"
    r"\bat all times\b|\bnobody\b|\bno one\b|\bwithout exception\b|\bstrictly\b|"
    r"统一|一律|永远|总是|始终|必须|千万|不许|禁止|不准|一定要|都要|只能|只用|只往|"
    r"都用|全用|任何|一概|每次|老规矩|严禁", _I)
PROHIBIT = re.compile(
    r"\bdon'?t\b|\bdo not\b|\bno more\b|\bstop\b|\bnot\b|\bnever\b|\bavoid\b|"
    r"不要|别|不用|不能|不可以|不得", _I)
PREFERENCE = re.compile(
    r"\bI (?:prefer|like|want(?! to (?:make sure|see|know|check))|need|love|hate|usually|"
    r"always|never|tend to|expect)\b|"
    r"\bI'?d (?:rather|like|prefer)\b|\bI like my\b|\bthe way I like\b|\bmy preference\b|"
    r"\bI'?m (?:on|using|in)\b|\bI (?:use|work|run|code)\b|"
    r"我习惯|我喜欢|我希望|我偏好|我一般|我倾向|我更喜欢|我不喜欢|我讨厌|我是在|我用的|我平时", _I)
DECISION = re.compile(
    r"\bwe(?:'ve| have)? decided\b|\bwe(?:'re| are) (?:moving|switching|going|dropping|"
    r"migrating)\b|\bwe (?:switched|moved|migrated|dropped|agreed|chose|picked)\b|"
    r"\b(?:the )?team (?:decided|agreed|chose)\b|\bwe(?:'ll| will) (?:use|go with|stick)\b|"
    r"\bdecision\b|\bwe settled\b|\bgoing with\b|"
    r"我们定了|定了|决定|商量好|统一换|改成|换成|改用|敲定", _I)
STATE = re.compile(
    r"\bwe (?:use|run|deploy|host|store|keep|ship|talk|support|only)\b|\bwe'?re on\b|"
    r"\bour \w+ (?:is|are|runs?|lives?|uses?)\b|\b(?:is|are) (?:deployed|hosted|written|"
    r"built|stored|signed|tracked|kept)\b|\bruns? on\b|\blives? (?:in|at|on)\b|"
    r"\bis (?:a|an|our)\b|\bit'?s (?:a|an|on|in)\b|\bgo(?:es)? (?:to|through)\b|"
    r"\bdeploy(?:s|ed)? (?:from|to|on|via)\b|\bbuilt (?:with|on)\b|\bwritten in\b|"
    r"\bthe (?:minimum|default|target|goal)\b|\bwe have\b|"
    r"我们用|用的是|跑在|部署在|放在|装在|写进|存在|走的是|都在|是用|用来|分到|只有|是\s*\S+\s*写的|"
    r"目前是|现在是|已经是|一共", _I)
# the forms of STATE that name nothing by themselves ("we have ...", "this is a ...")
VAGUE_STATE = re.compile(r"\bwe have\b|\bis (?:a|an|our)\b|\bit'?s (?:a|an|on|in)\b", _I)
ENTITY = re.compile(
    r"(?:^|[\s(（`\"'])(?:~|\.{0,2})/[\w.-]+/[\w./-]*|[A-Za-z]:\\|\b\w+\.(?:ya?ml|json|toml|"
    r"lock|css|xml|py|ts|js|go|kt|jks|sql|md|env|conf|ini)\b|\b\d+\.\d+(?:\.\d+)?\b|"
    r"\b[A-Za-z0-9-]+\.(?:com|cn|io|dev|net|org|internal|local|app)\b|"
    r"\b[A-Z][a-z]+[A-Z]\w*\b|\b[a-z]+_[a-z_]+\b|\b[A-Z]{2,}[0-9]*\b|"
    r"\b\d{4}-\d{2}-\d{2}\b|\b(?:jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec)\w* \d{1,2}\b|"
    r"\d+月\d+[日号]|:=|\[\]\w|\w\(\)|"
    r"\b(?:macOS|Linux|Windows|Ubuntu|CentOS|Debian|WSL2?|Android|iOS|Docker|Kubernetes|"
    r"Python|Node|Java|Kotlin|Go|Rust|Ruby|PHP|TypeScript|Postgres(?:QL)?|MySQL|SQLite|"
    r"Redis|ClickHouse|MongoDB|npm|pnpm|yarn|bun|pip|conda|uv|git|GitHub|GitLab)\b", 0)
LEAD = re.compile(
    r"\bfor context\b|\bsome context\b|\bcontext:|\bbackground\b|\bheads.?up\b|"
    r"\ba constraint\b|\bfyi\b|\bjust so you know\b|\bthings you need to know\b|"
    r"\bthe rule\b|\brule:|\bsync(?:ing)? you\b|\bnotice\b|"
    r"背景|交代|补充|规矩|约束|通知一下|同步一下|先说|说一下|提醒", _I)
CONVENTION = re.compile(
    r"\b(?:in|use|write) (?:English|Chinese)\b|\b(?:format|style|convention|naming|exports?|"
    r"comments?|docstrings?|commit messages?|descriptions?|answers?)\b|"
    r"用(?:中文|英文)|格式|风格|命名|规范|注释|日志|回答|描述", _I)
UNDECIDED = re.compile(
    r"\bopen question\b|\bnot sure\b|\bhaven'?t (?:made up|decided)\b|"
    r"\bdon'?t know (?:yet|if|whether)\b|"
    r"\bundecided\b|\bdecide later\b|\bhasn'?t decided\b|\bmade up my mind\b|"
    r"没想清楚|没想好|还没定|没定|先记着|再讨论|再说|再决定|之后再定|以后再定|再定|要不要|"
    r"得想清楚", _I)
GOAL = re.compile(
    r"\bgoal\b|\bdeadline\b|\bhas to be (?:live|done|out)\b|\bmust be (?:live|done|out)\b|"
    r"\bby (?:jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec)\w*\b|\blaunch\b|\bmilestone\b|"
    r"\bthe plan for\b|\baiming\b|目标|截止|上线前|之前要|计划", _I)
CHANGE = re.compile(
    r"\bfrom now on\b|\bfrom today\b|\bno longer\b|\binstead(?: of)?\b|\bmov(?:e|ed|ing) "
    r"(?:\w+ )*?(?:off|to|away)\b|\bswitch(?:ing|ed)?\b|\bmigrat\w+\b|\breplac\w+\b|"
    r"\bgoes away\b|\bnot \w+(?: \w+)? anymore\b|\bdropp?(?:ed|ing)?\b|\bchange of plan\b|"
    r"\brevert\w*\b|\bgo back to\b|\bback to\b|\braised? to\b|\bnow (?:is|are|uses?|goes?)\b|"
    r"\bis now\b|\bare now\b|"
    r"从现在开始|从今天起|作废|改成|改为|换成|改用|不再|之前说的|回退|不用\S{0,12}了|已经是|"
    r"现在是|退役|换了|统一换", _I)
REPEAT = re.compile(
    r"\bagain\b|\bI (?:told|said|asked)\b|\blast time\b|\bas I said\b|\blike I said\b|"
    r"\bsecond time\b|\bonce more\b|\balready (?:said|told)\b|\bremember\?|"
    r"\bsame (?:drill|rule|as always)\b|\bas always\b|\breminder\b|\bremind(?:ing)? you\b|"
    r"提醒|"
    r"说过|上次|又(?:写|转|用|忘|加|犯|来|是)|再说一遍|一再|还是老规矩|老规矩", _I)
HEDGE = re.compile(
    r"\bI think\b|\bI don'?t think\b|\bI guess\b|\bI bet\b|\bmaybe\b|\bprobably\b|"
    r"\bperhaps\b|\bseems?\b|\bnot sure\b|\btbh\b|\bI suspect\b|\bmight\b|\bkind of\b|"
    r"\bI feel like\b|\bclaims?\b|\bapparently\b|"
    r"我觉得|好像|可能|也许|大概|似乎|怀疑|感觉|估计|不确定", _I)
QUESTION = re.compile(
    r"[?？]|^(?:what|why|how|who|which|when|where|is|are|does|do|can|should|could|would)\b|"
    r"吗|呢[。？?]?$|要不要|是不是|有没有|怎么|为什么|什么|哪", _I)
OBSERVATION = re.compile(
    r"\bbroken\b|\bbroke\b|\bdoesn'?t (?:work|clear|respect|load|show)\b|\bisn'?t working\b|"
    r"\bcrash\w*\b|\berror\w*\b|\bfail\w*\b|\bslow\b|\bflicker\w*\b|\bwrong\b|\bbug\w*\b|"
    r"\bworks? (?:correctly|properly|right)\b|\bforever\b|\bblurry\b|\bhangs?\b|"
    r"\btimes? out\b|\bdown\b|\bred\b|\bnot working\b|"
    r"\bwon'?t\b|\bcan'?t reproduce\b|\bshows?\b|"
    r"报错|挂了|不对|太慢|很慢|坏了|没反应|出错|失败|打不开|超时|卡住|有问题|不工作", _I)
ONE_OFF = re.compile(
    r"\btoday\b|\btonight\b|\bthis (?:time|morning|afternoon|week|once|one|file|pr|branch|"
    r"commit)\b|\bfor now\b|\bright now\b|\bjust now\b|\bat the moment\b|\bin a bit\b|"
    r"\blater\b|\bnot today\b|\bfor today\b|\byesterday\b|\btomorrow\b|\bfor the slide\b|"
    r"\bjust (?:paste|show|look|check)\b|\bleave (?:it|them|all)\b|\bfor this\b|"
    r"今天|今晚|这次|这回|先别|先不|暂时|刚才|刚刚|下午|上午|明天|昨天|回头|等会|一会儿|"
    r"这个月|看一眼|不用存|先这样", _I)
REQUEST = re.compile(
    r"^(?:please |pls )?(?:can|could|would|will) (?:you|u)\b|\bcan (?:you|u)\b|"
    r"\bplease (?:check|look|run|show|fix|draft|ping|add|do|make|review|update|write|put)\b|"
    r"\bshow me\b|\blet'?s\b|\btake a look\b|\blook (?:at|into)\b|\bgo ahead\b|\bdo it\b|"
    r"^(?:ok[,.]? )?(?:add|fix|run|open|push|commit|delete|remove|bump|build|write|put|"
    r"check|try|post|squash|merge|pull|update|rename|make|do|list)\b|\bpls\b|"
    r"帮我|帮忙|看一下|看一眼|看看|跑一下|查查|给我|拉一下|麻烦|改吧|删吧|提交吧|试一下|"
    r"顺便把|你先", _I)
CHATTER = re.compile(
    r"\b(?:lol|haha|thanks|thank you|thx|good night|hey|hi|hello|random question|random q|"
    r"trivia|fun|concert|weekend|lunch|dinner|recipe|sister|daughter|son|wife|husband|"
    r"married|snow\w*|weather|coffee|espresso|tea|camp|dentist|cat|dog|typhoon|vacation|"
    r"holiday)\b|哈哈|谢谢|谢啦|晚安|早[。！]|吃|周末|拉面|演唱会|牙医|猫|狗|结婚|下雪|天气",
    _I)
GENERAL = re.compile(
    r"\bexplain\b|\bexplanation\b|\bbasic question\b|\btrivia\b|\brandom q(?:uestion)?\b|"
    r"\bhistory of\b|\bwhat'?s (?:it|the difference|actually)\b|\bwhere does\b|"
    r"\bwhy (?:is|are|do)\b|"
    r"\bconcept\b|科普|讲讲|解释一下|是怎么算的|什么意思|哪一年|概念问题|为什么|有啥区别|"
    r"到底是什么", _I)
DEICTIC = re.compile(r"\b(?:the other one|that one|this one|not that|not this|not there)\b|"
                     r"不是这个|不是那个|另一个|这个不对|那个不对", _I)
# a user passing on what someone else said, or narrating: not a rule of theirs
REPORT = re.compile(r"\b(?:someone|somebody|customer|they|he|she) (?:said|asked|claims?|says)\b|"
                    r"\basked (?:me|whether|if)\b|有人说|说他|反馈", _I)

# a task handed over now, whatever else the sentence holds (unless it is a rule too)
TASK = re.compile(
    r"\bI'?d like you to\b|\bI want you to\b|\bwe (?:still )?need to\b|\bthere is a need\b|"
    r"^task:|^now (?:use|run|try|do|make|add|let)\b|^search\b|^(?:go|try) (?:and|to)\b|"
    r"^(?:please |pls )?(?:can|could|would) (?:you|u)\b|^use (?:the |a |an )?(?:app|browser|"
    r"subagent|tool)s?\b|帮我|麻烦你", _I)

# an opinion, or a sentence pointing back at the conversation, at its start
OPENER = re.compile(r"^(?:(?:ok|so|well|hm+|alright|all right),?\s+)?"
                    r"(?:i (?:think|guess|suppose|feel|bet|"
                    r"don'?t think|doubt)|maybe|perhaps|probably|it'?s|it is|that'?s|this is|"
                    r"there'?s|here'?s|我觉得|好像|可能|也许|应该是)\b", _I)

# a sentence quoting a conversation or a template ("User: ...", "SECURITY NOTICE: ...")
QUOTED = re.compile(r"^(?:user|assistant|system|human|ai|bot|agent|tool)\s*:|"
                    r"^(?:security notice|important|note to (?:the )?(?:model|assistant))\b", _I)

# the assistant's next turn taking a user's words as a lasting instruction
ACK = re.compile(
    r"^(?:(?:ok(?:ay)?|sure|right|yes|got it|noted|understood|will do|of course|good point|"
    r"sorry(?: about that)?|apologies|my bad)\b[,.!:;—-]?\s*)+|"
    r"^(?:好的?|明白|收到|了解|知道了|记住了|记下了|抱歉|对不起|没问题)",
    _I)
ACK_LASTING = re.compile(
    r"\bfrom now on\b|\bgoing forward\b|\bin future\b|\bI'?ll (?:always|remember|keep|use|stick|"
    r"make sure)\b|\bwill (?:always|remember)\b|\bnoted\b|\bremember(?:ed)?\b|\bevery time\b|"
    r"以后|今后|都会|记住了|记下了|统一|一律|不会再", _I)

SIGNALS: tuple[tuple[str, str, re.Pattern[str]], ...] = (
    ("explicit", "asks to remember or says 'from now on'", EXPLICIT),
    ("rule", "a standing rule (always, never, only, must)", RULE),
    ("prohibit", "a prohibition (don't, not, 别)", PROHIBIT),
    ("preference", "a first-person preference", PREFERENCE),
    ("decision", "a decision", DECISION),
    ("state", "says how things are (we use, runs on, lives in)", STATE),
    ("entity", "names a tool, path, version or host", ENTITY),
    ("lead", "announced as context or a rule", LEAD),
    ("goal", "a goal or deadline", GOAL),
    ("convention", "a convention (format, style, naming, language)", CONVENTION),
    ("change", "says something changed", CHANGE),
    ("repeat", "repeats an earlier correction", REPEAT),
    ("hedge", "hedged (I think, maybe)", HEDGE),
    ("question", "a question", QUESTION),
    ("observation", "a bug observation", OBSERVATION),
    ("one_off", "scoped to now (today, this time, for now)", ONE_OFF),
    ("request", "a task for now (can you, let's, look into)", REQUEST),
    ("chatter", "small talk", CHATTER),
    ("general", "a general-knowledge question", GENERAL),
    ("deictic", "points at the conversation (that one)", DEICTIC),
    ("report", "passes on what someone else said", REPORT),
)
WORDS = {name: words for name, words, _ in SIGNALS}
WORDS.update({"subject": "gives a value to a subject (the package manager, a version)",
              "acknowledged": "the assistant took it as a lasting instruction",
              "short": "too short to stand alone", "long": "too long for one memory line",
              "bias": "base"})


def read(sentence: str, *, ack: str | None = None) -> dict[str, float]:
    """The signals present in `sentence` (1.0 each); `ack` is the assistant's next turn
    in the conversation, when there is one."""
    s = " ".join(sentence.split())
    out = {name: 1.0 for name, _, pat in SIGNALS if pat.search(s)}
    if subjects(s):
        out["subject"] = 1.0
    if acknowledged(ack):
        out["acknowledged"] = 1.0
    core = re.sub(r"[\W_]+", "", s)
    cjk = sum(1 for ch in core if "\u3400" <= ch <= "\u9fff")
    size = cjk + (len(core) - cjk) / 4  # roughly words
    if size < 6:
        out["short"] = 1.0
    if len(s) > 300:
        out["long"] = 1.0
    return out


def acknowledged(reply: str | None) -> bool:
    """The assistant's reply opens by taking the instruction on and speaks of lasting."""
    if not reply:
        return False
    head = " ".join(reply.split())[:200]
    return bool(ACK.search(head)) and bool(ACK_LASTING.search(head))
