"""What a memory item is about: its subject (the package manager, the test runner, the
deploy target, the minimum iOS version ...) and the value it gives that subject, so a
later statement about the same subject replaces the earlier one whatever its wording.

Two readings, both plain data a person can extend:
- `KINDS`: subjects whose values are known tools ("package manager": npm, pnpm, yarn,
  bun). A sentence naming several tools of one kind gives the value the one it does not
  negate ("bun instead of pnpm", "not npm, yarn", "不用 GORM 了，改成 sqlc");
- settings: a name followed closely by a number ("minSdk is 29", "minimum supported iOS
  is 16.4", "Python 3.9"): the subject is the name, the value the number.
A sentence with neither has no subject; admission then compares words (consolidate.admission).
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass

# subject -> its values; each value -> the spellings that name it (lower case)
KINDS: dict[str, dict[str, tuple[str, ...]]] = {
    "JavaScript package manager": {"npm": ("npm",), "pnpm": ("pnpm",), "yarn": ("yarn",),
                                   "bun": ("bun",)},
    "Python environment manager": {"uv": ("uv",), "pip": ("pip",), "poetry": ("poetry",),
                                   "conda": ("conda",), "pipenv": ("pipenv",),
                                   "pdm": ("pdm",)},
    "test runner": {"jest": ("jest",), "vitest": ("vitest",), "mocha": ("mocha",),
                    "pytest": ("pytest",), "unittest": ("unittest",), "jasmine": ("jasmine",),
                    "ava": ("ava",)},
    "deploy target": {"vercel": ("vercel",), "netlify": ("netlify",),
                      "cloudflare pages": ("cloudflare pages", "cloudflare"),
                      "fly.io": ("fly.io", "flyctl"), "heroku": ("heroku",),
                      "render": ("render.com",), "railway": ("railway",)},
    "database": {"postgresql": ("postgresql", "postgres"), "mysql": ("mysql",),
                 "sqlite": ("sqlite",), "mongodb": ("mongodb", "mongo"),
                 "mariadb": ("mariadb",), "clickhouse": ("clickhouse",),
                 "dynamodb": ("dynamodb",), "cockroachdb": ("cockroachdb",)},
    "cache": {"redis": ("redis",), "memcached": ("memcached",), "valkey": ("valkey",)},
    "data access layer": {"prisma": ("prisma",), "drizzle": ("drizzle",),
                          "typeorm": ("typeorm",), "sequelize": ("sequelize",),
                          "gorm": ("gorm",), "sqlc": ("sqlc",), "sqlalchemy": ("sqlalchemy",),
                          "knex": ("knex",), "ent": ("entgo",)},
    "chat and alerts": {"slack": ("slack",), "discord": ("discord",),
                        "dingtalk": ("dingtalk", "钉钉"), "wecom": ("wecom", "企业微信"),
                        "feishu": ("feishu", "飞书", "lark"), "teams": ("ms teams",
                                                                      "microsoft teams"),
                        "telegram": ("telegram",)},
    "CI": {"github actions": ("github actions",), "gitlab ci": ("gitlab ci", "gitlab-ci"),
           "jenkins": ("jenkins",), "circleci": ("circleci",), "travis": ("travis",),
           "buildkite": ("buildkite",), "drone": ("drone ci",)},
    "experiment tracking": {"mlflow": ("mlflow",), "wandb": ("wandb", "weights & biases",
                                                             "weights and biases"),
                            "tensorboard": ("tensorboard",), "neptune": ("neptune",),
                            "comet": ("comet ml", "comet.ml")},
    "linter and formatter": {"eslint": ("eslint",), "biome": ("biome",),
                             "prettier": ("prettier",), "ruff": ("ruff",), "black": ("black",),
                             "flake8": ("flake8",), "pylint": ("pylint",)},
    "database migrations": {"flyway": ("flyway",), "liquibase": ("liquibase",),
                            "alembic": ("alembic",), "atlas": ("atlasgo",)},
    "error tracking": {"sentry": ("sentry",), "bugsnag": ("bugsnag",),
                       "rollbar": ("rollbar",)},
    "bundler": {"webpack": ("webpack",), "vite": ("vite",), "rollup": ("rollup",),
                "esbuild": ("esbuild",), "parcel": ("parcel",), "turbopack": ("turbopack",)},
}
# languages, as a subject only beside what they are the language of
LANGUAGES = {"english": ("english", "英文", "英语"), "chinese": ("chinese", "中文", "汉语"),
             "japanese": ("japanese", "日文", "日语")}
LANGUAGE_OF = (("code comments", re.compile(r"\bcomments?\b|注释", re.I)),
               ("answers", re.compile(r"\banswers?\b|\brepl(?:y|ies)\b|\brespond\b|回答|回复|交流",
                                      re.I)),
               ("commit messages", re.compile(r"\bcommit messages?\b|提交信息", re.I)),
               ("UI text", re.compile(r"\bui text\b|界面", re.I)))

# a value the sentence turns away from: "not X", "instead of X", "off X", "X goes away"
_NEG_BEFORE = re.compile(
    r"(?:\bnot|\bno|\bnever|\bdon'?t use|\bdo not use|\binstead of|\boff(?: of)?|\bfrom|"
    r"\bmoving away from|\bdrop(?:ped|ping)?|\breplac\w+|\bstop using|\bwithout|\brather than|"
    r"\bover|不用|不再用|别用|不要用|弃用|去掉|从|把|而不是|不是)\s*(?:the\s+|using\s+)?$", re.I)
_NEG_AFTER = re.compile(
    r"^\s*(?:goes away|is gone|was dropped|is dropped|is out|anymore|no more)|"
    r"^[^，。,.;；]{0,8}?(?:作废|不用了|弃用|下线|解散|删掉|去掉|换成|改成|改为|退役)", re.I)
# a setting's name: a platform or tool whose version is a rule, or a camelCase key
_SETTING_NAMES = (r"iOS|iPadOS|macOS|Android|Python|Node(?:\.js)?|Java|Kotlin|Swift|Xcode|Go|"
                  r"Ruby|PHP|Rust|Postgres(?:QL)?|MySQL|Redis|CentOS|Ubuntu|Debian|Alpine|Expo SDK|"
                  r"SDK|API level|[a-z]+[A-Z]\w*|最低\w{0,4}版本")
_SETTING = re.compile(
    r"(?<![\w.])(?P<name>" + _SETTING_NAMES + r")(?P<gap>(?:\s+[a-z]+){0,3}?)\s*"
    r"(?:(?:is|=|:|to|of|at)\s+|(?:现在|已经|目前)?(?:是|为|改成|升到|提到|设成|设为)\s*)?"
    r"(?:now\s+)?v?(?P<num>\d+(?:\.\d+)*)\b")
_MIN = re.compile(r"\bmin(?:imum)?\b|\blowest\b|最低|最小|min", re.I)


@dataclass(frozen=True)
class Subject:
    name: str  # "JavaScript package manager", "minimum iOS version"
    values: frozenset[str]  # what the sentence says it is
    dropped: frozenset[str] = frozenset()  # what it says it no longer is

    def describe(self) -> str:
        v = ", ".join(sorted(self.values))
        return f"{self.name}: {v}" if v else self.name


def norm(text: str) -> str:
    return unicodedata.normalize("NFKC", text).casefold()


def _find(text: str, spelling: str) -> list[int]:
    if spelling.isascii():
        pat = r"(?<![\w.-])" + re.escape(spelling) + r"(?![\w-])"
        return [m.start() for m in re.finditer(pat, text)]
    return [m.start() for m in re.finditer(re.escape(spelling), text)]


def _split(text: str, found: dict[str, list[tuple[int, int]]]
           ) -> tuple[frozenset[str], frozenset[str]]:
    pos, neg = set(), set()
    for value, spans in found.items():
        negated = all(_NEG_BEFORE.search(text[max(0, a - 24):a])
                      or _NEG_AFTER.search(text[b:b + 12]) for a, b in spans)
        (neg if negated else pos).add(value)
    return frozenset(pos), frozenset(neg)


def subjects(text: str) -> list[Subject]:
    """Every subject `text` gives a value, in the order of KINDS, then languages, then
    settings."""
    t = norm(text)
    out: list[Subject] = []
    for kind, values in KINDS.items():
        found: dict[str, list[tuple[int, int]]] = {}
        for value, spellings in values.items():
            for sp in spellings:
                found.setdefault(value, []).extend((i, i + len(sp)) for i in _find(t, sp))
        found = {v: s for v, s in found.items() if s}
        if found:
            pos, neg = _split(t, found)
            out.append(Subject(kind, pos, neg))
    for of, pat in LANGUAGE_OF:
        if not pat.search(t):
            continue
        found = {}
        for value, spellings in LANGUAGES.items():
            spans = [(i, i + len(sp)) for sp in spellings for i in _find(t, sp)]
            if spans:
                found[value] = spans
        if found:
            pos, neg = _split(t, found)
            out.append(Subject(f"language of {of}", pos, neg))
    seen = {s.name for s in out}
    for m in _SETTING.finditer(text):
        name = m.group("name")
        mn = "minimum " if _MIN.search(text[max(0, m.start() - 24):m.start()]) else ""
        label = f"{mn}{name} version"
        if label in seen:
            continue
        seen.add(label)
        out.append(Subject(label, frozenset({m.group("num")})))
    return out


def conflict(new: Subject, old: Subject) -> bool:
    """The same subject, given another value: the old statement is out of date."""
    if new.name.casefold() != old.name.casefold() or not new.values or not old.values:
        return False
    return not (new.values & old.values) or bool(old.values & new.dropped)


def agrees(new: Subject, old: Subject) -> bool:
    """The same subject with the same value: a restatement."""
    return (new.name.casefold() == old.name.casefold() and bool(new.values)
            and new.values == old.values)
