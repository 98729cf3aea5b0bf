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
import os
import re
from pathlib import Path
from typing import Any

from memoryd.paths import mkdir_private
from memoryd.redact import Redactor

FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b[@-Z\\-_]")
# their DEBUG (and litellm's INFO) carries request bodies, prompts or noise; APScheduler's
# INFO is two lines per job run ("Running job", "executed successfully"), forever
QUIET = ("LiteLLM", "LiteLLM Router", "LiteLLM Proxy", "litellm", "openai", "httpx",
         "httpcore", "aiohttp.access", "aiohttp.client", "watchfiles", "urllib3",
         "apscheduler")


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


class PrivateFileHandler(logging.handlers.RotatingFileHandler):
    """A rotating log file that only its owner can read (0600, whatever the umask),
    reopened on SIGHUP (`reopen_logs`) so an external logrotate can move it away."""

    def _open(self) -> Any:
        fd = os.open(self.baseFilename, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        if os.fstat(fd).st_mode & 0o077:
            os.fchmod(fd, 0o600)
        return os.fdopen(fd, "a", encoding=self.encoding, errors=self.errors)

    def reopen(self) -> None:
        self.acquire()
        try:
            if self.stream is not None:
                self.stream.close()
            self.stream = self._open()
        finally:
            self.release()


def reopen_logs() -> int:
    """Reopen every log file we write (SIGHUP); returns how many."""
    n = 0
    for h in logging.getLogger().handlers:
        if isinstance(h, PrivateFileHandler):
            h.reopen()
            n += 1
    return n


def configure_logging(level: str, log_file: Path | None = None) -> None:
    hygiene = Hygiene()
    handlers: list[logging.Handler] = [logging.StreamHandler()]
    if log_file is not None:
        mkdir_private(log_file.parent)
        handlers.append(PrivateFileHandler(
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
