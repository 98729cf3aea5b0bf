"""Whole-process latency of `memoryctl status` (what a hook pays on every prompt).

Runs `memoryctl --socket S status` as a fresh process N times against a live memoryd
and prints p50/p99: through the installed entry point (`memoryd.cli.memoryctl`: no argparse,
no json; the daemon renders the text) and through the argparse path
(`memoryd.cli.commands`, what `status` took before), next to three raw baselines
measured in the same run: `python -c pass` and `python -S -c pass` (interpreter
start-up with and without site, the floor) and a stdlib-only script that sends the same
GET /v1/status over the socket. Goal (issue 11): p50 <= 60 ms whole process.

    .venv/bin/python bench/memoryctl_status.py [--runs 60]
    .venv/bin/python bench/memoryctl_status.py --units 200000   # on search.py's store

With `--units N` the daemon serves a copy of the store `search.py` builds (N units; the
counts status shows come from maintained counters, so they cost the same at any size).
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from harness import Memoryd, machine, ms, process_times, ratio, short_dir, summary  # noqa: E402

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
            import bigstore
            import search as sb
            from idle import fresh_copy

            built = bigstore.store_dir(args.units)  # search.py's store (with one-liners)
            sb.build(args.units, 1, built)
            home = fresh_copy(built, "status-home")
        with Memoryd(home, src, sock, env={"MEMORYD_AUTO_SUMMARY": "0"}) as md:
            md.wait_ready(300)
            st = md.wait_caught_up(900)
            print(f"memoryd serving {st['units']:,} units, {st['sessions']:,} sessions")
            # memoryctl as installed (the entry point script), its bytecode cached outside
            # the tree, not compiled at every start as PYTHONDONTWRITEBYTECODE (set on this
            # machine) would have it; the same for every command timed
            ctl = [str(Path(sys.executable).parent / "memoryctl"), "--socket", str(sock),
                   "status"]
            full = [sys.executable, "-m", "memoryd.cli.commands", "--socket", str(sock),
                    "status"]
            env = {**os.environ, "PYTHONPYCACHEPREFIX": str(Path(tmp) / "pycache")}
            env.pop("PYTHONDONTWRITEBYTECODE", None)
            script = Path(tmp) / "raw.py"
            script.write_text(RAW)
            process_times(ctl, 3, env)  # warm the page cache, write the bytecode cache
            process_times(full, 3, env)
            cmds = {
                "python -c pass": [sys.executable, "-c", "pass"],
                "python -S -c pass": [sys.executable, "-S", "-c", "pass"],
                "raw stdlib GET /v1/status": [sys.executable, str(script), str(sock)],
                "memoryctl status": ctl,
                "  argparse path": full,
            }
            times: dict[str, list[float]] = {k: [] for k in cmds}
            for _ in range(args.runs):  # interleaved: each sees the same load
                for k, cmd in cmds.items():
                    times[k] += process_times(cmd, 1, env)
            rows = {k: summary(v) for k, v in times.items()}
        if args.units:
            shutil.rmtree(home, ignore_errors=True)
    for name, s in rows.items():
        print(f"{name:<28} p50 {ms(s['p50']):>9}   p99 {ms(s['p99']):>9}")
    m, raw = rows["memoryctl status"], rows["raw stdlib GET /v1/status"]
    floor = rows["python -c pass"]
    print(f"memoryctl / raw: p50 {ratio(m['p50'], raw['p50'])}, p99 {ratio(m['p99'], raw['p99'])}"
          f"; / python -c pass: p50 {ratio(m['p50'], floor['p50'])}; argparse path / "
          f"quick: p50 {ratio(rows['  argparse path']['p50'], m['p50'])}"
          f"; goal p50 <= 60 ms: {'met' if m['p50'] <= 0.060 else 'NOT met'}")


if __name__ == "__main__":
    main()
