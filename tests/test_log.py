"""memoryd.log: what reaches memoryd.log is clean text without secrets or prompts."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path

import pytest

from memoryd.log import QUIET, configure_logging, tame_litellm

SECRET = "sk-proj-" + "Zq7" * 10


@pytest.fixture
def log_file(tmp_path: Path) -> Iterator[Path]:
    root = logging.getLogger()
    saved = (root.handlers[:], root.level,
             {n: logging.getLogger(n).level for n in (*QUIET, "memoryd.test")})
    path = tmp_path / "log" / "memoryd.log"
    configure_logging("DEBUG", path)
    try:
        yield path
    finally:
        for h in root.handlers:
            h.close()
        root.handlers[:], levels = saved[0], saved[2]
        root.setLevel(saved[1])
        for n, lvl in levels.items():
            logging.getLogger(n).setLevel(lvl)


def flushed(path: Path) -> str:
    for h in logging.getLogger().handlers:
        h.flush()
    return path.read_text(encoding="utf-8")


def test_litellm_colour_handler_removed_and_its_info_debug_kept_out(log_file, capsys):
    # what `import litellm` does (litellm/_logging.py): a coloured stderr handler on its
    # loggers. The real import is exercised by tests/reliability/test_secrets.py, in a
    # daemon; here it would cost a minute on a loaded machine.
    lg = logging.getLogger("LiteLLM")
    theirs = logging.StreamHandler()
    theirs.setFormatter(logging.Formatter("\033[92m%(asctime)s - %(name)s\033[0m: %(message)s"))
    lg.addHandler(theirs)
    tame_litellm()
    assert theirs not in lg.handlers and lg.propagate and lg.level == logging.WARNING
    lg.info("\x1b[92m12:00:00 - LiteLLM:INFO\x1b[0m: utils.py:1 - selected model")
    lg.debug("POST Request Sent from LiteLLM: messages=[{'content': 'the whole prompt'}]")
    logging.getLogger("openai._base_client").debug("Request options: {'json_data': 'prompt'}")
    logging.getLogger("httpcore.http11").debug("send_request_body.started")
    lg.warning("\x1b[92mcolour\x1b[0m warning stays, plainly")
    text = flushed(log_file)
    assert "selected model" not in text and "prompt" not in text
    assert "send_request_body" not in text
    assert "colour warning stays, plainly" in text and "\x1b" not in text
    assert "\x1b" not in capsys.readouterr().err


def test_our_records_are_redacted_and_stripped(log_file):
    log = logging.getLogger("memoryd.test")
    log.debug("calling with key %s and \x1b[31mred\x1b[0m", SECRET)
    try:
        raise ValueError(f"bad url postgres://bob:hunter2pw@db/x {SECRET}")
    except ValueError:
        log.exception("failed")
    text = flushed(log_file)
    assert SECRET not in text and "hunter2pw" not in text and "\x1b" not in text
    assert "calling with key [REDACTED] and red" in text
    assert "postgres://bob:[REDACTED]@db/x" in text and "Traceback" in text


def test_a_bad_format_string_is_logged_not_raised(log_file):
    logging.getLogger("memoryd.test").warning("%d items", "not a number")
    assert "%d items" in flushed(log_file)
