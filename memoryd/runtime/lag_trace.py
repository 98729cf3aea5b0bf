"""Timestamps of an appended line on its way to searchable, for `bench/ingest_lag.py`.

Each stage (the watch hands over a batch, the file is read, its units are committed, the
index writer wakes, commits and reloads its searchers) logs one DEBUG line in the
`memoryd.runtime.lag_trace` logger with the wall-clock time, so a bench run with
`--log-level DEBUG` can say where an append's time went. At any other level a stage costs
one `isEnabledFor` check.
"""

from __future__ import annotations

import logging
import time

log = logging.getLogger(__name__)


def stage(name: str, detail: object = "") -> None:
    if log.isEnabledFor(logging.DEBUG):
        log.debug("lag %s %.6f %s", name, time.time(), detail)
