"""memoryd as a ranker for the shared retrieval benchmark (`../shared/eval`).

    cd /work/shared
    python -m eval.run --sessions eval/data/lme-dev \
        --ranker bench.eval_ranker:make --ranker bm25 --ranker fts5

(run with the project's venv and the project root on PYTHONPATH, e.g.
`PYTHONPATH=/work/main /work/main/.venv/bin/python -m eval.run ...`).

`make(corpus, **opts)` starts `python -m memoryd` on the benchmark's session directory
(one generic source; every scope is a folder, which the generic adapter records as the
session's project), waits until `/v1/status` reports `caught_up`, and returns
`search(query, scope, k)`: one `POST /v1/search` with `project=<sessions>/<scope>` and
`max_results=k`, mapped to record ids (the benchmark's turn ids). The daemon is
terminated at exit.

Options (`--opt key=value`):
    sessions   the session directory memoryd watches (default: the eval's lme-dev)
    home       keep memoryd's state here (default: a temporary directory, removed at exit);
               an existing home is reused, so a second run skips the ingest
    timeout    seconds to wait for the ingest to catch up (default 600)
    mode       or|and, passed to /v1/search (default or)
    endpoint   search (default) or context: score /v1/context's `recalled` items, asked
               with cwd=<sessions>/<scope> (the project) and max_recalled=k
    log        file for the daemon's stderr (default: discarded)
    root       import memoryd from this checkout instead of this one (e.g. a snapshot)
"""

from __future__ import annotations

import atexit
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from memoryd.client import DaemonNotRunning, MemorydClient  # noqa: E402

DEFAULT_SESSIONS = Path("/work/shared/eval/data/lme-dev")


def _default_sessions() -> Path:
    try:
        from eval.common import data_dir  # the harness's own notion of its data folder

        return data_dir() / "lme-dev"
    except ImportError:
        return DEFAULT_SESSIONS


class Daemon:
    """`python -m memoryd` in a subprocess, with its own home and a short socket path."""

    def __init__(self, sessions: Path, home: Path | None, log: str | None,
                 root: Path = ROOT) -> None:
        self.sessions = sessions
        self._tmp: list[Path] = []
        if home is None:
            home = Path(tempfile.mkdtemp(prefix="memoryd-eval-"))
            self._tmp.append(home)
        self.home = home
        sock_dir = Path(tempfile.mkdtemp(prefix="mde", dir="/tmp"))  # sun_path is short
        self._tmp.append(sock_dir)
        self.socket = sock_dir / "m.sock"
        self._log = open(log, "ab") if log else subprocess.DEVNULL  # noqa: SIM115
        env = {**os.environ, "MEMORYD_HOME": str(home)}
        env.pop("MEMORYD_SOCKET", None)
        env["PYTHONPATH"] = os.pathsep.join(
            p for p in (str(root), env.get("PYTHONPATH", "")) if p)
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "memoryd", "--home", str(home), "--no-default-sources",
             "--source", f"generic={sessions}", "--socket", str(self.socket), "--port", "0"],
            env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=self._log,
            cwd=str(root), start_new_session=True)
        atexit.register(self.close)
        self.client = MemorydClient(self.socket, timeout=60.0)

    def wait_caught_up(self, timeout: float) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError(f"memoryd exited with code {self.proc.returncode}")
            try:
                st = self.client.status()
                if st.get("caught_up"):
                    return st
            except (DaemonNotRunning, ConnectionError, OSError):
                pass
            if time.monotonic() > deadline:
                raise TimeoutError(f"memoryd did not catch up within {timeout:.0f}s")
            time.sleep(0.1)

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if self._log is not subprocess.DEVNULL:
            self._log.close()
            self._log = subprocess.DEVNULL
        for d in self._tmp:
            shutil.rmtree(d, ignore_errors=True)
        self._tmp.clear()


def make(corpus: dict[str, list[dict]], **opts: str):
    sessions = Path(opts.get("sessions") or _default_sessions()).resolve()
    home = Path(opts["home"]).resolve() if opts.get("home") else None
    mode = opts.get("mode", "or")
    daemon = Daemon(sessions, home, opts.get("log"),
                    Path(opts["root"]).resolve() if opts.get("root") else ROOT)
    t0 = time.monotonic()
    st = daemon.wait_caught_up(float(opts.get("timeout", 600)))
    print(f"[memoryd] caught up: {st['units']} units, {st['sessions']} sessions in "
          f"{time.monotonic() - t0:.1f}s", file=sys.stderr)
    client = daemon.client

    endpoint = opts.get("endpoint", "search")

    def search(query: str, scope: str, k: int) -> list[str]:
        if endpoint == "context":
            # what an agent working in the scope's folder would be handed: its project
            # first, then other projects; the budget is large so no item is cut for room
            r = client.request("POST", "/v1/context", {
                "query": query, "cwd": str(sessions / scope), "include": ["recalled"],
                "max_recalled": max(1, min(int(k), 50)), "budget_tokens": 200_000})
            return [x["record_id"] for x in r["recalled"]]
        r = client.search(query=query, project=str(sessions / scope), mode=mode,
                          max_results=max(1, min(int(k), 500)))
        return [x["record_id"] for x in r["results"]]

    search.daemon = daemon  # type: ignore[attr-defined]
    return search
