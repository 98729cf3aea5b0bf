"""Logging setup, called only by the entry points.

Every record that reaches our handlers passes `Hygiene`: ANSI colour codes are stripped
and secrets redacted (the same `Redactor` as ingest), whoever logged it. Third-party
loggers that write request bodies at DEBUG (litellm, openai, httpx, httpcore) are held
at WARNING whatever our level, so a prompt never reaches the log; `tame_litellm` also
takes litellm's own coloured stderr handler off its loggers once it is imported.
"""

from __future__ import annotations

import logging
import logging.handlers
import re
from pathlib import Path

from memoryd.redact import Redactor

FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b[@-Z\\-_]")
# their DEBUG (and litellm's INFO) carries request bodies, prompts or noise
QUIET = ("LiteLLM", "LiteLLM Router", "LiteLLM Proxy", "litellm", "openai", "httpx",
         "httpcore", "aiohttp.access", "aiohttp.client", "watchfiles", "urllib3")


class Hygiene(logging.Filter):
    """Strip ANSI escapes and redact secrets from a record's message and traceback."""

    def __init__(self, redactor: Redactor | None = None) -> None:
        super().__init__()
        self.redactor = redactor or Redactor(private_tags=())

    def clean(self, s: str) -> str:
        if "\x1b" in s:
            s = ANSI.sub("", s)
        return self.redactor.clean(s) or ""

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            msg = record.getMessage()
        except Exception:  # a bad format string: keep what there is
            msg = f"{record.msg!r} {record.args!r}"
        record.msg, record.args = self.clean(msg), None
        if record.exc_info and not record.exc_text:
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        if record.exc_text:
            record.exc_text = self.clean(record.exc_text)
        if record.stack_info:
            record.stack_info = self.clean(record.stack_info)
        return True


def configure_logging(level: str, log_file: Path | None = None) -> None:
    hygiene = Hygiene()
    handlers: list[logging.Handler] = [logging.StreamHandler()]
    if log_file is not None:
        log_file.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        handlers.append(logging.handlers.RotatingFileHandler(
            log_file, maxBytes=10 << 20, backupCount=3, encoding="utf-8"))
    for h in handlers:
        h.addFilter(hygiene)
    logging.basicConfig(level=level, format=FORMAT, handlers=handlers, force=True)
    for name in QUIET:
        logging.getLogger(name).setLevel(logging.WARNING)


def tame_litellm() -> None:
    """After `import litellm`: its loggers lose the coloured stderr handler it attaches
    at import and go through ours (hygiene, our format), at WARNING at most."""
    for name in ("LiteLLM", "LiteLLM Router", "LiteLLM Proxy"):
        lg = logging.getLogger(name)
        for h in list(lg.handlers):
            lg.removeHandler(h)
        lg.propagate = True
        if lg.level < logging.WARNING:  # NOTSET included
            lg.setLevel(logging.WARNING)
