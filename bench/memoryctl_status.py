"""Whole-process latency of `memoryctl status` (what a hook pays on every prompt).

Runs `memoryctl --socket S status` as a fresh process N times against a live memoryd
and prints p50/p99, next to two raw baselines measured in the same run: a bare
`python -c pass` (interpreter start-up, the floor) and a stdlib-only script that sends
the same GET /v1/status over the socket. Goal: p50 <= 120 ms.

    .venv/bin/python bench/memoryctl_status.py [--runs 60]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from harness import Memoryd, machine, ms, ratio, short_dir, summary  # noqa: E402

RAW = """
import http.client, json, socket, sys
class C(http.client.HTTPConnection):
    def connect(self):
        self.sock = socket.socket(socket.AF_UNIX); self.sock.connect(sys.argv[1])
c = C("localhost"); c.request("GET", "/v1/status"); json.loads(c.getresponse().read())
"""


def timed(cmd: list[str], runs: int) -> list[float]:
    out = []
    for _ in range(runs):
        t0 = time.perf_counter()
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
        out.append(time.perf_counter() - t0)
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=60)
    args = ap.parse_args()
    print(machine())
    with tempfile.TemporaryDirectory() as tmp, short_dir() as d:
        src = Path(tmp) / "src"
        src.mkdir()
        sock = d / "m.sock"
        with Memoryd(Path(tmp) / "home", src, sock) as md:
            md.wait_ready()
            ctl = [sys.executable, "-m", "memoryd.cli.memoryctl", "--socket", str(sock), "status"]
            script = Path(tmp) / "raw.py"
            script.write_text(RAW)
            timed(ctl, 3)  # warm the page cache
            rows = {
                "python -c pass": summary(timed([sys.executable, "-c", "pass"], args.runs)),
                "raw stdlib GET /v1/status": summary(
                    timed([sys.executable, str(script), str(sock)], args.runs)),
                "memoryctl status": summary(timed(ctl, args.runs)),
            }
    for name, s in rows.items():
        print(f"{name:<28} p50 {ms(s['p50']):>9}   p99 {ms(s['p99']):>9}")
    m, raw = rows["memoryctl status"], rows["raw stdlib GET /v1/status"]
    print(f"memoryctl / raw: p50 {ratio(m['p50'], raw['p50'])}, p99 {ratio(m['p99'], raw['p99'])}"
          f"; goal p50 <= 120 ms: {'met' if m['p50'] <= 0.120 else 'NOT met'}")


if __name__ == "__main__":
    main()
