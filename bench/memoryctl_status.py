"""Whole-process latency of `memoryctl status` (what a hook pays on every prompt).

Runs `memoryctl --socket S status` as a fresh process N times against a live memoryd
and prints p50/p99, next to two raw baselines measured in the same run: a bare
`python -c pass` (interpreter start-up, the floor) and a stdlib-only script that sends
the same GET /v1/status over the socket. Goal: p50 <= 120 ms.

    .venv/bin/python bench/memoryctl_status.py [--runs 60]
    .venv/bin/python bench/memoryctl_status.py --units 200000   # on search.py's store

With `--units N` the daemon serves a copy of the store `search.py` builds (N units; the
counts status shows come from maintained counters, so they cost the same at any size).
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from harness import (  # noqa: E402
    Memoryd, machine, ms, process_times, ratio, short_dir, summary)

RAW = """
import http.client, json, socket, sys
class C(http.client.HTTPConnection):
    def connect(self):
        self.sock = socket.socket(socket.AF_UNIX); self.sock.connect(sys.argv[1])
c = C("localhost"); c.request("GET", "/v1/status"); json.loads(c.getresponse().read())
"""


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=60)
    ap.add_argument("--units", type=int, default=0,
                    help="serve a copy of search.py's store of this many units")
    args = ap.parse_args()
    print(machine())
    with tempfile.TemporaryDirectory() as tmp, short_dir() as d:
        src = Path(tmp) / "src"
        src.mkdir()
        sock = d / "m.sock"
        home = Path(tmp) / "home"
        if args.units:
            import harness as h
            import search as sb
            from idle import fresh_copy

            built = h.OUT / f"search-g{h.GEN_VERSION}-{args.units}-s1"
            sb.build(args.units, 1, built)
            home = fresh_copy(built, "status-home")
        with Memoryd(home, src, sock, env={"MEMORYD_AUTO_SUMMARY": "0"}) as md:
            md.wait_ready(300)
            st = md.wait_caught_up(900)
            print(f"memoryd serving {st['units']:,} units, {st['sessions']:,} sessions")
            ctl = [sys.executable, "-m", "memoryd.cli.memoryctl", "--socket", str(sock), "status"]
            script = Path(tmp) / "raw.py"
            script.write_text(RAW)
            process_times(ctl, 3)  # warm the page cache
            rows = {
                "python -c pass": summary(process_times([sys.executable, "-c", "pass"], args.runs)),
                "raw stdlib GET /v1/status": summary(
                    process_times([sys.executable, str(script), str(sock)], args.runs)),
                "memoryctl status": summary(process_times(ctl, args.runs)),
            }
        if args.units:
            shutil.rmtree(home, ignore_errors=True)
    for name, s in rows.items():
        print(f"{name:<28} p50 {ms(s['p50']):>9}   p99 {ms(s['p99']):>9}")
    m, raw = rows["memoryctl status"], rows["raw stdlib GET /v1/status"]
    print(f"memoryctl / raw: p50 {ratio(m['p50'], raw['p50'])}, p99 {ratio(m['p99'], raw['p99'])}"
          f"; goal p50 <= 120 ms: {'met' if m['p50'] <= 0.120 else 'NOT met'}")


if __name__ == "__main__":
    main()
