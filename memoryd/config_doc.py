"""The configuration as text: a commented default file (`memoryctl config default`) and
the effective settings as TOML (`memoryctl config show`)."""

from __future__ import annotations

import re
from typing import Any

from memoryd.config import Settings

# one line per setting; a test checks every Settings field is described here
DESCRIPTIONS: dict[str, str] = {
    "watch.sources": 'extra roots: [{agent = "codex", path = "~/x"}]; agent may be "auto"',
    "watch.default_sources": "also watch every agent's default location that exists",
    "watch.debounce_ms": "how long a burst of file events is gathered",
    "watch.reconcile_seconds": "period of the stat-only scan that catches missed events",
    "watch.force_polling": "poll instead of inotify/FSEvents (network filesystems)",
    "watch.exclude": "glob patterns of paths never read",
    "watch.max_line_bytes": "longer transcript lines are skipped and counted",
    "server.socket": "Unix socket path (default: in the runtime dir)",
    "server.tcp_enabled": "also serve HTTP on tcp_host:tcp_port (bearer token required)",
    "server.tcp_host": "loopback only unless allow_non_loopback",
    "server.tcp_port": "0 picks a free port",
    "server.allow_non_loopback": "permit a non-loopback tcp_host (still needs the token)",
    "server.query_concurrency": "search/context requests answered at once",
    "server.query_backlog": "more that may wait for a slot; beyond, 503 + Retry-After",
    "server.query_max_wait_s": "a waiting search/context gets 503 + Retry-After after this",
    "privacy.redact_patterns": "extra regexes whose matches are redacted before storage",
    "privacy.private_tags": "<tag>…</tag> spans are never stored",
    "privacy.served_log_days": "days the log of context served to agents is kept (0: none)",
    "llm.model": "litellm route for summaries, e.g. ollama/qwen2.5 (none: extractive)",
    "llm.summary_model": "overrides llm.model for summaries (env MEMORYD_SUMMARY_MODEL wins)",
    "llm.api_base": "OpenAI-compatible server URL, with an openai/<name> model",
    "llm.api_key_env": "name of the environment variable holding the key (never the key)",
    "llm.timeout_s": "per-call timeout in seconds",
    "llm.concurrency": "LLM requests in flight at once",
    "llm.daily_token_budget": "input+output tokens per UTC day, then extractive (0: never call)",
    "llm.max_retries": "transient LLM failures retried per job, then extractive",
    "llm.retry_backoff_s": "first retry delay in seconds, doubled on each retry",
    "llm.retry_backoff_max_s": "longest retry delay in seconds",
    "summary.message_buffer_limit": "unsummarized messages that trigger a session summary",
    "summary.char_threshold": "... or unsummarized user+assistant characters",
    "summary.message_buffer_min": "recent messages a summary leaves out (cut at a user message)",
    "summary.interval_user_messages": "refresh the summary every N user messages (0: off)",
    "summary.idle_minutes": "a session idle this long gets a final summary",
    "summary.idle_min_messages": "... when at least this many messages are unsummarized",
    "summary.sweep_seconds": "period of the idle-session sweep",
    "summary.upgrade_minutes": "period of the pass that redoes extractive summaries with the model",
    "summary.max_words": "length limit of a session summary, in words",
    "summary.max_input_chars": "conversation text per LLM call (longer spans go in steps)",
    "summary.message_max_chars": "longer messages reach the LLM as head + tail",
    "summary.one_liner_min_chars": "tool calls and results this long get a one-line summary",
    "summary.one_liner_message_chars": "messages this long get a one-line summary",
    "summary.one_liner_batch": "units per one-liner LLM call",
    "summary.workers": "job queue workers",
    "summary.enabled": "automatic summaries and consolidation (false: manual runs only)",
    "consolidate.enabled": "scheduled consolidation: daily notes and MEMORY.md admission",
    "consolidate.cron": "when today's sessions are consolidated (cron, local time)",
    "consolidate.nightly_cron": "when yesterday is consolidated a last time (cron)",
    "consolidate.history": "history not consolidated yet (first start, new source) is, by "
                           "itself, a day at a time in the background",
    "consolidate.timezone": "IANA zone that defines the user's days (empty: the system's)",
    "consolidate.misfire_grace_s": "a run missed while asleep still runs once within this",
    "consolidate.max_entries": "MEMORY.md cap; the least useful entries go to HISTORY.md",
    "consolidate.ttl_days": "low-importance entries unconfirmed this long are demoted (0: never)",
    "consolidate.similarity": "a new item this similar confirms an entry instead of a new line",
    "retention.enabled": "the daily retention run (notes to HISTORY.md, units to archive/)",
    "retention.cron": "when retention runs (cron, local time)",
    "retention.daily_keep_days": "older daily notes are folded into HISTORY.md and removed",
    "retention.units_keep_days": "sessions idle longer move their units to archive/ (0: keep)",
    "store.url": "'' or sqlite: the embedded store; postgresql://user@host/db: a shared one",
    "store.machine": "this machine's name in a shared store (default: the host name)",
    "store.namespace": "which memory in a shared store (one PostgreSQL schema each)",
    "store.password_file": "file holding the database password (or the URL, PGPASSWORD, "
                           "~/.pgpass)",
    "store.changes_keep_days": "change-feed rows kept for a machine that is away (days); "
                               "one away longer rebuilds its index when back",
    "store.job_lease_s": "a claimed job's lease (s), renewed while it runs; a dead "
                         "machine's job is taken over after it runs out",
    "index.tail_commit_docs": "new units are searchable at once; they are committed to "
                              "the index on disk once this many wait",
    "index.tail_commit_s": "or once the oldest has waited this many seconds",
    "embed.enabled": "local embeddings beside BM25 when the memoryd[embed] extra is "
                     "installed; false turns them off",
    "embed.max_chars": "a turn is embedded cut to this many characters",
    "embed.reload_s": "new vectors are searched by meaning within this many seconds",
    "log.level": "DEBUG, INFO, WARNING or ERROR",
    "log.file": "also log to a rotating file in the log dir",
}


_ESCAPES = {"\b": "\\b", "\t": "\\t", "\n": "\\n", "\f": "\\f", "\r": "\\r",
            '"': '\\"', "\\": "\\\\"}
_BARE_KEY = re.compile(r"[A-Za-z0-9_-]+")


def toml_string(s: str) -> str:
    """A TOML basic string: quote, backslash and every control character the spec forbids
    raw (U+0000-U+001F, U+007F) escaped; everything else, CJK included, kept as is."""
    out = []
    for ch in s:
        if ch in _ESCAPES:
            out.append(_ESCAPES[ch])
        elif ord(ch) < 0x20 or ord(ch) == 0x7F:
            out.append(f"\\u{ord(ch):04X}")
        else:
            out.append(ch)
    return '"' + "".join(out) + '"'


def toml_key(k: str) -> str:
    return k if _BARE_KEY.fullmatch(k) else toml_string(k)


def _toml_value(v: Any) -> str:
    if v is None:
        return '""'
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int | float):
        return repr(v)
    if isinstance(v, str):
        return toml_string(v)
    if isinstance(v, list | tuple):
        return "[" + ", ".join(_toml_inline(x) for x in v) + "]"
    return _toml_inline(v)


def _toml_inline(v: Any) -> str:
    if isinstance(v, dict):
        return "{" + ", ".join(f"{toml_key(k)} = {_toml_value(x)}" for k, x in v.items()) + "}"
    return _toml_value(v)


def as_toml(data: dict[str, Any]) -> str:
    out = []
    for section, values in data.items():
        out.append(f"[{toml_key(section)}]")
        for key, v in values.items():
            out.append(f"{toml_key(key)} = {_toml_value(v)}" if v is not None
                       else f"# {key} is unset")
        out.append("")
    return "\n".join(out)


def default_config() -> str:
    """Every setting, commented out at its default, with what it does."""
    data = Settings().model_dump(mode="json")
    out = ["# memoryd configuration. Every line is commented out at its default.",
           "# Precedence: defaults < this file < MEMORYD_<SECTION>__<KEY> env < flags.", ""]
    for section, values in data.items():
        out.append(f"[{section}]")
        for key, v in values.items():
            desc = DESCRIPTIONS.get(f"{section}.{key}", "")
            if desc:
                out.append(f"# {desc}")
            out.append(f"# {key} = {_toml_value(v)}" if v is not None
                       else f"# {key} is unset by default")
        out.append("")
    return "\n".join(out)
