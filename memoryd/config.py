"""Settings: defaults < config.toml < MEMORYD_<SECTION>__<KEY> env < CLI flags.

Resolved once, in the entry point, into a frozen `Settings`. A bad file or value is a
`ConfigError` naming the file, the key and the reason; the file is never rewritten.
"""

from __future__ import annotations

import json
import os
import re
import socket
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal, get_origin

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_serializer,
    field_validator,
)

from memoryd.errors import ConfigError
from memoryd.store_target import StoreTarget, check_namespace, check_url, masked_url

AgentName = Literal[
    "auto", "claude-code", "codex", "gemini-cli", "pi", "openclaw", "nanobot", "generic"
]


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class SourceSettings(_Section):
    agent: AgentName = "auto"
    path: Path

    @field_validator("path")
    @classmethod
    def _expand(cls, v: Path) -> Path:
        return v.expanduser()


class WatchSettings(_Section):
    sources: tuple[SourceSettings, ...] = ()
    default_sources: bool = True  # also watch every known agent location that exists
    debounce_ms: int = Field(50, ge=1, le=60_000)
    reconcile_seconds: float = Field(30.0, gt=0)
    force_polling: bool = False
    exclude: tuple[str, ...] = ()  # glob patterns of paths never read
    max_line_bytes: int = Field(16 * 1024 * 1024, ge=1024)


class ServerSettings(_Section):
    socket: Path | None = None  # default: <runtime dir>/memoryd.sock
    tcp_enabled: bool = True
    tcp_host: str = "127.0.0.1"
    tcp_port: int = Field(7411, ge=0, le=65535)
    allow_non_loopback: bool = False
    # search/context: running at once, waiting (each at most query_max_wait_s); beyond: 503
    query_concurrency: int = Field(3, ge=1, le=64)
    query_backlog: int = Field(12, ge=0, le=1024)
    query_max_wait_s: float = Field(1.0, gt=0, le=300)

    @field_validator("tcp_host")
    @classmethod
    def _loopback_only(cls, v: str) -> str:
        return v.strip()


class PrivacySettings(_Section):
    redact_patterns: tuple[str, ...] = ()  # extra regexes whose matches are redacted
    private_tags: tuple[str, ...] = ("private",)  # <private>...</private> is never stored
    served_log_days: int = Field(30, ge=0, le=3650)  # context-served log kept; 0: not kept

    @field_validator("redact_patterns")
    @classmethod
    def _compiles(cls, v: tuple[str, ...]) -> tuple[str, ...]:
        for rx in v:  # the redactor compiles them at start: a bad one must not get that far
            try:
                re.compile(rx)
            except re.error as e:
                raise ValueError(f"invalid regular expression {rx!r}: {e}") from None
        return v


class LLMSettings(_Section):
    model: str | None = None  # any litellm route; none -> extractive summaries
    summary_model: str | None = None
    api_base: str | None = None
    api_key_env: str | None = None  # the NAME of the env var holding the key
    timeout_s: float = Field(60.0, gt=0)
    concurrency: int = Field(2, ge=1, le=64)  # LLM requests in flight at once
    daily_token_budget: int = Field(200_000, ge=0)  # input+output tokens per UTC day; 0: no LLM
    max_retries: int = Field(4, ge=0, le=20)  # transient failures retried per job
    retry_backoff_s: float = Field(30.0, gt=0)  # first retry delay, doubled each time
    retry_backoff_max_s: float = Field(1800.0, gt=0)


class SummarySettings(_Section):
    message_buffer_limit: int = Field(50, ge=2)  # unsummarized messages that trigger a summary
    char_threshold: int = Field(10_000, ge=100)  # ... or unsummarized user+assistant chars
    message_buffer_min: int = Field(10, ge=0)  # recent messages left out of the summary
    interval_user_messages: int = Field(10, ge=0)  # refresh every N user messages; 0: off
    idle_minutes: float = Field(15.0, gt=0)  # idle sessions get a final summary
    idle_min_messages: int = Field(3, ge=1)
    sweep_seconds: float = Field(60.0, gt=0)  # period of the idle sweep
    upgrade_minutes: float = Field(60.0, gt=0)  # period of the extractive -> model upgrade pass
    max_words: int = Field(200, ge=20, le=2000)
    max_input_chars: int = Field(24_000, ge=1000)  # conversation text per LLM call
    message_max_chars: int = Field(2_000, ge=200)  # longer messages are cut to head + tail
    one_liner_min_chars: int = Field(400, ge=0)  # shorter tool calls/results: no one-liner
    one_liner_message_chars: int = Field(1_500, ge=0)  # shorter messages: no one-liner
    one_liner_batch: int = Field(20, ge=1, le=200)  # units per LLM call
    workers: int = Field(2, ge=1, le=32)
    enabled: bool = True  # automatic summaries and consolidation; manual runs always work


def _check_cron(v: str) -> str:
    from apscheduler.triggers.cron import CronTrigger

    try:
        CronTrigger.from_crontab(v)
    except ValueError as e:
        raise ValueError(f"not a cron expression (minute hour day month weekday): {e}") from None
    return v


class ConsolidateSettings(_Section):
    enabled: bool = True  # scheduled consolidation (daily notes, MEMORY.md admission)
    cron: str = "0 */2 * * *"  # the day-so-far run: every 2 hours
    nightly_cron: str = "30 3 * * *"  # finishes yesterday's notes
    history: bool = True  # days of history not consolidated yet: done by itself, oldest first
    timezone: str = ""  # IANA name for local days ("" = the system's zone)
    misfire_grace_s: int = Field(6 * 3600, ge=1)  # a run missed in sleep catches up once
    max_entries: int = Field(200, ge=1, le=10_000)  # MEMORY.md cap; least useful demoted
    ttl_days: int = Field(120, ge=0)  # low-importance entries never confirmed again: demoted
    similarity: float = Field(0.8, gt=0, le=1)  # a new item this similar confirms an entry

    @field_validator("cron", "nightly_cron")
    @classmethod
    def _cron(cls, v: str) -> str:
        return _check_cron(v)

    @field_validator("timezone")
    @classmethod
    def _zone(cls, v: str) -> str:
        if v:
            import zoneinfo

            try:
                zoneinfo.ZoneInfo(v)
            except (zoneinfo.ZoneInfoNotFoundError, ValueError):
                raise ValueError(f"unknown time zone {v!r} (an IANA name such as "
                                 "'Asia/Shanghai')") from None
        return v


class RetentionSettings(_Section):
    enabled: bool = True
    cron: str = "15 4 * * *"  # daily
    daily_keep_days: int = Field(30, ge=1)  # older daily notes fold into HISTORY.md
    units_keep_days: int = Field(180, ge=0)  # older sessions' units go to archive/; 0: keep all

    @field_validator("cron")
    @classmethod
    def _cron(cls, v: str) -> str:
        return _check_cron(v)


class StoreSettings(_Section):
    """Where the truth lives (DESIGN §11): '' or 'sqlite' is the embedded SQLite file; a
    postgresql:// URL shares one memory among a fleet of daemons, a schema per namespace.
    The URL is only ever shown masked (`config show` too)."""

    url: str = ""
    machine: str = Field(default_factory=socket.gethostname, min_length=1, max_length=200)
    namespace: str = "default"
    password_file: Path | None = None
    # the change feed keeps what every machine active within this many days has not
    # applied; a machine away longer rebuilds its index from the store when it returns
    changes_keep_days: float = Field(7.0, gt=0, le=3650)
    # a claimed job's lease, renewed every third of it while the job runs: a machine
    # that dies holding a job leaves it to another this long after its last renewal
    job_lease_s: float = Field(60.0, ge=1, le=3600)

    @field_validator("url")
    @classmethod
    def _url(cls, v: str) -> str:
        return check_url(v)

    @field_validator("namespace")
    @classmethod
    def _namespace(cls, v: str) -> str:
        return check_namespace(v)

    @field_validator("password_file")
    @classmethod
    def _expand(cls, v: Path | None) -> Path | None:
        return v.expanduser() if v is not None else None

    @field_serializer("url")
    def _masked(self, v: str) -> str:
        return masked_url(v) if v else v

    def target(self) -> StoreTarget:
        return StoreTarget(url=self.url, namespace=self.namespace, machine=self.machine,
                           password_file=self.password_file)


class IndexSettings(_Section):
    """The search index's live tail (`memoryd.index.tail`): a new unit is searchable at
    once; the tantivy commit that takes it to disk waits until the tail holds
    `tail_commit_docs` units or its oldest is `tail_commit_s` old (defaults: `TailPolicy`)."""

    tail_commit_docs: int = Field(500, ge=1, le=10_000_000)
    tail_commit_s: float = Field(5.0, gt=0, le=86_400)


class EmbedSettings(_Section):
    """Local embeddings beside BM25 (`memoryd.embed`), on when the `memoryd[embed]` extra is
    installed; `enabled = false` turns them off. `max_chars`: a turn is embedded cut to this.
    `reload_s`: the model's copy of the vectors, which search ranks by meaning, is read
    again no more often than this once new ones are written (a unit embedded meanwhile
    is found by its words only)."""

    enabled: bool = True
    max_chars: int = Field(512, ge=32, le=8192)
    reload_s: float = Field(10.0, ge=0.0, le=3600.0)


class LogSettings(_Section):
    level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = "INFO"
    file: bool = False

    @field_validator("level", mode="before")
    @classmethod
    def _upper(cls, v: Any) -> Any:
        return v.upper() if isinstance(v, str) else v


class Settings(_Section):
    watch: WatchSettings = WatchSettings()
    server: ServerSettings = ServerSettings()
    privacy: PrivacySettings = PrivacySettings()
    llm: LLMSettings = LLMSettings()
    summary: SummarySettings = SummarySettings()
    consolidate: ConsolidateSettings = ConsolidateSettings()
    retention: RetentionSettings = RetentionSettings()
    store: StoreSettings = StoreSettings()
    index: IndexSettings = IndexSettings()
    embed: EmbedSettings = EmbedSettings()
    log: LogSettings = LogSettings()


# settings memoryd once had and no longer reads: a config file or environment that still
# sets one loads as before (a user's start never fails on it), with a note to remove it
REMOVED = {
    "server.reexec_after_units": "the re-exec at rest was removed: it gave back 2-4 MB",
}

ENV_PREFIX = "MEMORYD_"
_TOP_LEVEL_ENV = {"MEMORYD_HOME", "MEMORYD_CONFIG", "MEMORYD_SOCKET", "MEMORYD_SHARED",
                  "MEMORYD_SUMMARY_MODEL", "MEMORYD_AUTO_SUMMARY"}


def load_settings(
    path: Path | None = None,
    environ: Mapping[str, str] = os.environ,
    overrides: Mapping[str, Mapping[str, Any]] | None = None,
    *,
    notes: list[str] | None = None,
) -> Settings:
    """Build Settings. `path` is the config file (it need not exist unless given
    explicitly by the user: pass `required=True` semantics via `explicit`). A `REMOVED`
    setting is dropped, and what to tell the user about it appended to `notes`."""
    data: dict[str, dict[str, Any]] = {}
    origin = "defaults"
    if path is not None and path.exists():
        origin = str(path)
        try:
            raw = tomllib.loads(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError) as e:
            raise ConfigError(f"{path}: cannot read: {e}") from e
        except tomllib.TOMLDecodeError as e:
            raise ConfigError(f"{path}: invalid TOML: {e}") from e
        for section, values in raw.items():
            if not isinstance(values, dict):
                raise ConfigError(f"{path}: {section}: expected a [{section}] table")
            data[section] = dict(values)
    env_keys = _merge_env(data, environ)
    auto = environ.get("MEMORYD_AUTO_SUMMARY")
    if auto is not None and "enabled" not in data.get("summary", {}):
        data.setdefault("summary", {})["enabled"] = auto  # pydantic reads "false" as False
        env_keys["summary.enabled"] = "MEMORYD_AUTO_SUMMARY"
    for section, values in (overrides or {}).items():
        data.setdefault(section, {}).update(values)
    for key, why in REMOVED.items():
        section, _, name = key.partition(".")
        if name in data.get(section, {}):
            del data[section][name]
            where = env_keys.get(key, origin)
            if where != origin:
                where = f"environment variable {where}"
            if notes is not None:
                notes.append(f"{where}: {key} is no longer used ({why}); remove it")
    try:
        return Settings.model_validate(data)
    except ValidationError as e:
        # every problem, one per line, so one `config check` shows them all
        problems, first_key = [], None
        for err in e.errors():
            key = ".".join(str(p) for p in err["loc"])
            first_key = first_key or key
            where = origin
            env_name = (env_keys.get(key.split(".")[0] + "." + key.split(".")[1])
                        if "." in key else None)
            if env_name:
                where = f"environment variable {env_name}"
            problems.append(f"{where}: {key}: {err['msg']}")
        raise ConfigError("\n".join(problems), field=first_key) from None


def _merge_env(data: dict[str, dict[str, Any]], environ: Mapping[str, str]) -> dict[str, str]:
    """Apply MEMORYD_<SECTION>__<KEY>; returns {"section.key": env name} for error messages."""
    seen: dict[str, str] = {}
    for name, value in environ.items():
        if not name.startswith(ENV_PREFIX) or name in _TOP_LEVEL_ENV or "__" not in name:
            continue
        section, _, key = name[len(ENV_PREFIX):].lower().partition("__")
        if not section or not key:
            continue
        data.setdefault(section, {})[key] = _env_value(section, key, value)
        seen[f"{section}.{key}"] = name
    return seen


def _env_value(section: str, key: str, value: str) -> Any:
    """A list or table setting takes JSON (`MEMORYD_WATCH__EXCLUDE='["*.tmp"]'`); every
    other value stays the string it is, and pydantic converts it for number and boolean
    fields, so `MEMORYD_LLM__MODEL=123` is the model "123", not the number 123."""
    if not _structured(section, key):
        return value
    try:
        parsed = json.loads(value)
    except ValueError:
        return value
    return parsed if isinstance(parsed, list | dict) else value


def _structured(section: str, key: str) -> bool:
    sec = Settings.model_fields.get(section)
    model = sec.annotation if sec is not None else None
    if not (isinstance(model, type) and issubclass(model, BaseModel)):
        return False
    field = model.model_fields.get(key)
    if field is None:
        return False
    ann = field.annotation
    return get_origin(ann) in (tuple, list, dict) or (
        isinstance(ann, type) and issubclass(ann, BaseModel))


def parse_source(spec: str) -> SourceSettings:
    """`AGENT=PATH` from the command line (a bare PATH means auto)."""
    agent, sep, path = spec.partition("=")
    if not sep:
        agent, path = "auto", spec
    try:
        return SourceSettings(agent=agent, path=Path(path))  # type: ignore[arg-type]
    except ValidationError as e:
        raise ConfigError(f"--source {spec}: {e.errors()[0]['msg']}", field="source") from None


def settings_summary(s: Settings) -> str:
    """One log line of the effective settings; secrets would show only as set/unset."""
    sources = ", ".join(f"{x.agent}={x.path}" for x in s.watch.sources) or "-"
    return (
        f"sources=[{sources}] default_sources={s.watch.default_sources} "
        f"tcp={f'{s.server.tcp_host}:{s.server.tcp_port}' if s.server.tcp_enabled else 'off'} "
        f"llm_model={s.llm.summary_model or s.llm.model or 'none (extractive)'} "
        f"log_level={s.log.level} store={s.store.target().masked()}"
        + (f" namespace={s.store.namespace} machine={s.store.machine}"
           if s.store.target().kind == "postgresql" else "")
    )
