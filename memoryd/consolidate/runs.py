"""What status says about consolidation (issue 27, item 6): per recent day, when it ran
and what it admitted, confirmed, superseded, demoted and dropped, and warnings when it
has run for several days with sessions and admitted nothing, or when its last run
failed. The rows are `store.consolidation_runs`'; this module only reads them."""

from __future__ import annotations

import datetime as dt
from typing import Any

RECENT_DAYS = 7
SILENT_DAYS = 3  # this many most recent days with sessions and nothing admitted: a warning
CHANGES = ("added", "superseded", "demoted", "daily_added")  # each happens once: summed
LATEST = ("sessions", "confirmed", "dropped")  # restated by every run: the latest's


def per_day(runs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Runs (newest day and run first) folded into one row per day."""
    days: dict[str, dict[str, Any]] = {}
    for r in runs:
        d = days.get(r["day"])
        if d is None:
            d = days[r["day"]] = {
                "date": r["day"], "last_run_at": _stamp(r["at"]), "runs": 0, "failed": 0,
                "last_ok": bool(r["ok"]), "last_error": r["error"], "last_trigger": r["trigger"],
                **{k: 0 for k in CHANGES}, **{k: None for k in LATEST}}
        d["runs"] += 1
        if not r["ok"]:
            d["failed"] += 1
            continue
        for k in CHANGES:
            d[k] += int(r[k])
        for k in LATEST:
            if d[k] is None:
                d[k] = int(r[k])
    return list(days.values())


def warnings(days: list[dict[str, Any]], failure: dict[str, Any] | None) -> list[str]:
    out = []
    if failure is not None:
        out.append(f"the last consolidation run (of {failure['day']}, {failure['trigger']}, "
                   f"at {_stamp(failure['at'])}) failed: {failure['error']}")
    silent = []
    for d in days:  # newest first: the run of days with sessions that admitted nothing
        if not d["sessions"]:
            continue
        if d["added"] or d["confirmed"]:
            break
        silent.append(d["date"])
    if len(silent) >= SILENT_DAYS:
        out.append(f"consolidation ran on {len(silent)} days with sessions ({silent[-1]} to "
                   f"{silent[0]}) and admitted nothing to MEMORY.md: see `memoryctl run "
                   f"consolidate --date {silent[0]} --dry-run` for what it dropped and why")
    return out


def _stamp(ts: float) -> str:
    return dt.datetime.fromtimestamp(ts).astimezone().isoformat(timespec="seconds")
