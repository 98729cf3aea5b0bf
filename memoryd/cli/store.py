"""`memoryctl store migrate --to postgresql://…|sqlite`: move a history between the
embedded SQLite store and a shared PostgreSQL namespace (issue 14 item 8).

The copy runs in a subprocess (`python -m memoryd.move`), not in memoryctl and
not through the daemon: memoryctl must never import the store or the driver (it starts
fast), and the copy must work with no daemon running (the usual way to move in is to
stop the daemon, copy, and start it in fleet mode) and must not be cut off by the
daemon's request timeouts on a long copy. The subprocess reports JSON lines; this module
draws them as a progress bar. Standard library only.
"""

from __future__ import annotations

import json
import os
import sys

TYPE_CHECKING = False
if TYPE_CHECKING:
    import argparse
    from typing import Any, TextIO

BAR = 30
EXIT_OK, EXIT_ERROR, EXIT_USAGE = 0, 1, 2


def add_parsers(sub: Any) -> None:
    st = sub.add_parser("store", help="the store: move a history into (or out of) "
                                      "a shared PostgreSQL store")
    sts = st.add_subparsers(dest="store_action", required=True)
    m = sts.add_parser("migrate", help="copy this machine's history into another store "
                                       "(resumable after a kill; running it twice copies "
                                       "nothing twice)")
    m.add_argument("--to", required=True, metavar="URL",
                   help="postgresql://user@host/db (the password is never printed), "
                        "or 'sqlite' to copy the PostgreSQL store back into this home")
    m.add_argument("--from", dest="source", metavar="URL",
                   help="with --to sqlite: the PostgreSQL URL (default: [store] url)")
    m.add_argument("--namespace", help="the namespace in PostgreSQL (default: [store] "
                                       "namespace)")
    m.add_argument("--machine", help="this machine's name (default: [store] machine)")


def main(args: argparse.Namespace, out: TextIO | None = None) -> int:
    import subprocess  # only this verb needs it: memoryctl starts fast

    from memoryd.store_target import refuse_password_in_flag

    try:
        refuse_password_in_flag(args.to, "--to")
        refuse_password_in_flag(args.source or "", "--from")
    except ValueError as e:
        print(f"memoryctl: store migrate: {e}", file=sys.stderr)
        return EXIT_USAGE
    cmd = [sys.executable, "-m", "memoryd.move", "--to", args.to]
    for flag, value in (("--home", args.home), ("--from", args.source),
                        ("--namespace", args.namespace), ("--machine", args.machine)):
        if value:
            cmd += [flag, value]
    out = out or sys.stdout
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True, encoding="utf-8",
                            env={**os.environ, "PYTHONUNBUFFERED": "1"})
    with proc:
        return _follow(proc, args, out)


def _follow(proc: Any, args: argparse.Namespace, out: TextIO) -> int:
    assert proc.stdout is not None
    draw = Drawer(out, out.isatty() and not args.json)
    last: dict[str, Any] = {}
    try:
        for line in proc.stdout:
            try:
                event = json.loads(line)
            except ValueError:
                continue
            last = event
            if args.json:
                continue
            draw(event)
    except KeyboardInterrupt:
        proc.terminate()
        proc.wait()
        print("\nstopped; run the same command again to resume", file=sys.stderr)
        return EXIT_ERROR
    rc = proc.wait()
    if args.json and last:
        print(json.dumps(last, ensure_ascii=False, indent=2), file=out)
    if last.get("event") == "error":
        print(f"memoryctl: store migrate: {last['error']}", file=sys.stderr)
        return EXIT_ERROR
    return EXIT_OK if rc == 0 and last.get("event") == "done" else EXIT_ERROR


class Drawer:
    """One bar per table: redrawn in place on a terminal, one line per table otherwise."""

    def __init__(self, out: TextIO, tty: bool) -> None:
        self.out, self.tty = out, tty

    def __call__(self, e: dict[str, Any]) -> None:
        kind = e.get("event")
        if kind == "start":
            self.out.write(f"copying {e['from']} → {e['to']}\n")
        elif kind == "progress":
            total = max(1, e["total"])
            filled = int(BAR * min(e["done"], total) / total)
            text = (f"{e['table']:<22} [" + "#" * filled + "-" * (BAR - filled) +
                    f"] {e['done']}/{e['total']}")
            if self.tty:
                self.out.write("\r\x1b[2K" + text + ("\n" if e["done"] >= e["total"] else ""))
            elif e["done"] >= e["total"]:
                self.out.write(text + "\n")
        elif kind == "done":
            self.out.write(render_done(e) + "\n")
        self.out.flush()


def render_done(e: dict[str, Any]) -> str:
    copied = sum(e["copied"].values())
    there = sum(e["already_there"].values())
    rate = f", {e['units_per_s']:.0f} units/s" if e.get("units_per_s") else ""
    parts = ", ".join(f"{n} {t}" for t, n in e["copied"].items() if n)
    return (f"done in {e['elapsed_s']:.1f}s: {copied} rows copied ({parts or 'nothing new'})"
            f", {there} already there{rate}")
