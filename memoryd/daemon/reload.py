"""SIGHUP: re-read the configuration and reopen the log files, never die.

The new config is validated the same way as at startup; an invalid one is logged and
the running one kept. What can change live is applied (the log level; watch sources and
the reconciliation period, which the daemon re-reads on its next pass); anything else
that changed is named in the log as needing a restart.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from memoryd.config import Settings
from memoryd.errors import ConfigError
from memoryd.log import reopen_logs

log = logging.getLogger(__name__)

# dotted keys that take effect without a restart
LIVE = {"log.level", "watch.sources", "watch.default_sources", "watch.reconcile_seconds"}


def changed_keys(old: Settings, new: Settings) -> list[str]:
    def flat(d: dict[str, Any], prefix: str = "") -> dict[str, Any]:
        out: dict[str, Any] = {}
        for k, v in d.items():
            if isinstance(v, dict):
                out.update(flat(v, f"{prefix}{k}."))
            else:
                out[f"{prefix}{k}"] = v
        return out

    a, b = flat(old.model_dump(mode="json")), flat(new.model_dump(mode="json"))
    return sorted(k for k in a.keys() | b.keys() if a.get(k) != b.get(k))


def reload_settings(current: Settings, load: Callable[[], Settings] | None) -> Settings:
    """Blocking (reads files): call it in a thread. Returns the settings to run with."""
    n = reopen_logs()
    if load is None:
        log.info("SIGHUP: %d log files reopened; no config file to re-read", n)
        return current
    try:
        new = load()
    except ConfigError as e:
        log.error("SIGHUP: config not reloaded, the running one is kept: %s", e)
        return current
    keys = changed_keys(current, new)
    if not keys:
        log.info("SIGHUP: config re-read, nothing changed; %d log files reopened", n)
        return current
    live = [k for k in keys if k in LIVE]
    later = [k for k in keys if k not in LIVE]
    root = logging.getLogger()
    # this line is logged at the more verbose of the two levels, then the new one applies
    root.setLevel(min(root.level, logging.getLevelName(new.log.level)))
    log.info("SIGHUP: config reloaded; applied now: %s%s", ", ".join(live) or "none",
             f"; after a restart: {', '.join(later)}" if later else "")
    root.setLevel(new.log.level)
    return new
