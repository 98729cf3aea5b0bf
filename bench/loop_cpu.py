"""CPU per request by daemon thread over the Unix socket (the event loop's share apart
from the reader's), against a bare aiohttp server in the same run, and where the loop's
share goes (cProfile of the loop thread on its CPU clock, `--profile`).

The daemon serves a small generated corpus (or a copy of a store bench/bigstore.py built,
`--home`): the loop's work per request does not depend on the store's size, the reader's
does. Requests are sent one at a time as `memoryctl` sends them (`MemorydClient`: a new
connection per request, `Connection: close`): health, search and context in turn. CPU is
the scheduler's account per thread (`/proc/<pid>/task/<tid>/schedstat`), summed over the
batch and divided by its requests; the loop is the main thread, the other threads are
named by `py-spy dump` (grouped: reader, writer, index, other).

The raw baseline: a bare aiohttp server (no middleware, one handler per route that reads
the body, parses its JSON and answers bytes recorded from the daemon's own answers to the
same requests) on its own Unix socket, asked the same way: aiohttp's floor per request.

    .venv/bin/python bench/loop_cpu.py                      # 20k generated lines
    .venv/bin/python bench/loop_cpu.py --profile 20         # + py-spy of the loop thread
    MEMORYD_BENCH_OUT=/work/bench-data .venv/bin/python bench/loop_cpu.py \\
        --home /work/bench-data/search-g2-1000000-s1       # a copy of the 1M store
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import subprocess
import sys
import textwrap
import time
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import harness as h  # noqa: E402

from memoryd.client import MemorydClient  # noqa: E402

# bytecode written (outside the tree) as an installed daemon has it: this machine sets
# PYTHONDONTWRITEBYTECODE, and compiling every module would be most of a start's CPU
ENV = {"MEMORYD_AUTO_SUMMARY": "0", "PYTHONDONTWRITEBYTECODE": "",
       "PYTHONPYCACHEPREFIX": str(h.OUT / "pycache")}
SPY = Path(sys.executable).parent / "py-spy"  # thread names only

BARE = textwrap.dedent("""
    import json, sys
    from aiohttp import web
    answers = json.loads(open(sys.argv[2]).read())

    async def handle(request):
        if request.method == "POST":
            json.loads(await request.read())
        return web.Response(body=answers[request.path].encode(),
                            content_type="application/json")

    app = web.Application()
    app.router.add_post("/v1/search", handle)
    app.router.add_post("/v1/context", handle)
    app.router.add_get("/v1/health", handle)
    web.run_app(app, path=sys.argv[1], print=None, handle_signals=True)
""")


def thread_cpu(pid: int) -> dict[int, float]:
    out = {}
    for t in Path(f"/proc/{pid}/task").iterdir():
        try:
            out[int(t.name)] = int((t / "schedstat").read_text().split()[0]) / 1e9
        except (OSError, ValueError, IndexError):
            continue
    return out


def thread_names(pid: int) -> dict[int, str]:
    """tid -> Python thread name (py-spy dump), the main thread as "loop"."""
    names = {pid: "loop"}
    if SPY.exists():
        r = subprocess.run([str(SPY), "dump", "--pid", str(pid)], capture_output=True,
                           text=True)
        for ln in r.stdout.splitlines():
            if ln.startswith("Thread ") and '"' in ln:
                tid = ln.split()[1]
                try:
                    names.setdefault(int(tid, 0), ln.split('"')[1])
                except ValueError:
                    continue
    return names


def group(name: str) -> str:
    if name == "loop":
        return "loop"
    for key, g in (("reader", "reader"), ("writer", "writer"), ("index", "index"),
                   ("tantivy", "index")):
        if key in name:
            return g
    return "other"


def by_group(before: dict[int, float], after: dict[int, float],
             names: dict[int, str]) -> dict[str, float]:
    out: dict[str, float] = defaultdict(float)
    for tid, c in after.items():
        out[group(names.get(tid, "?"))] += c - before.get(tid, 0.0)
    return out


def requests(n: int, seed: int, projects: list[str]) -> list[tuple[str, dict]]:
    gen = h.TextGen(seed)
    rng = random.Random(seed * 101)
    qs = [q for _, q, _ in gen.queries(rng, n)]
    out = []
    for i in range(n):
        q = qs[i % len(qs)]
        out.append(("/v1/health", None))
        out.append(("/v1/search", {"query": q}))
        out.append(("/v1/context", {"query": q, "cwd": projects[i % len(projects)],
                                    "budget_tokens": 2000}))
    return out


ROUTES = ("/v1/health", "/v1/search", "/v1/context")


def call(client: MemorydClient, route: str, body: dict | None) -> object:
    return client.request("GET" if body is None else "POST", route, body)


def measure(client: MemorydClient, pid: int, names: dict[int, str],
            reqs: list[tuple[str, dict]]) -> dict[str, dict]:
    """Per route: wall times and CPU per request by thread group."""
    res: dict[str, dict] = {}
    for route in ROUTES:
        mine = [b for r, b in reqs if r == route]
        wall = []
        c0 = thread_cpu(pid)
        for body in mine:
            t0 = time.perf_counter()
            call(client, route, body)
            wall.append(time.perf_counter() - t0)
        cpu = by_group(c0, thread_cpu(pid), names)
        res[route] = {"wall": wall, "cpu": {k: v / len(mine) for k, v in cpu.items()}}
    return res


def _profiled(run_home: Path, src: Path, sd: Path, reqs: list[tuple[str, dict]],
              out: Path) -> dict[str, tuple[int, float, float]]:
    import pstats

    d = h.Memoryd(run_home, src, sd / "p.sock", log_path=sd / "profiled.log", env=ENV,
                  python_args=[__file__, "--profiled-child", str(out)])
    try:
        d.wait_ready(300)
        d.wait_caught_up(300)
        for route, body in reqs:
            call(d.client, route, body)
    finally:
        d.stop()
    st = pstats.Stats(str(out))
    return {f"{Path(file).name}:{line}({fn})": (nc, tt, ct)
            for (file, line, fn), (_cc, nc, tt, ct, _) in st.stats.items()}  # type: ignore


def profile(run_home: Path, src: Path, sd: Path, reqs: list[tuple[str, dict]],
            out: Path) -> str:
    """cProfile of the daemon's main thread (the event loop; cProfile sees no other
    thread), on the same home (nothing left to ingest): a daemon asked the 20 warm-up
    requests, less one asked those and `reqs` too, per function: the loop's work per
    request, item by item. cProfile's own cost inflates small calls: read the shares and
    the call counts, not the absolute times."""
    base = _profiled(run_home, src, sd, reqs[:20], out)
    full = _profiled(run_home, src, sd, reqs[:20] + reqs, out)
    n = len(reqs)
    diff = {k: (nc - base.get(k, (0, 0.0, 0.0))[0], tt - base.get(k, (0, 0.0, 0.0))[1],
                ct - base.get(k, (0, 0.0, 0.0))[2]) for k, (nc, tt, ct) in full.items()}
    tot = sum(max(0.0, tt) for _, tt, _ in diff.values())
    once = next((v[0] for k, v in diff.items() if "(_run_once)" in k), 0)
    rows = [f"loop thread under cProfile: {n} requests, {1000 * tot / n:.2f} ms per request "
            f"of CPU profiled (inflated by cProfile), {once / n:.1f} loop iterations "
            "(_run_once) per request",
            "self time, share, calls per request:"]
    for k, (nc, tt, ct) in sorted(diff.items(), key=lambda kv: -kv[1][1])[:35]:
        rows.append(f"  {100 * tt / tot:5.1f}%  {nc / n:6.1f}  {k}")
    rows.append("inclusive:")
    for k, (nc, tt, ct) in sorted(diff.items(), key=lambda kv: -kv[1][2])[:60]:
        if ct < 0.01 * tot:
            break
        rows.append(f"  {100 * ct / tot:5.1f}%  {nc / n:6.1f}  {k}")
    return "\n".join(rows)


def table(res: dict[str, dict], bare: dict[str, dict] | None) -> str:
    rows = []
    for route, r in res.items():
        s = h.summary(r["wall"])
        cpu = r["cpu"]
        rows.append([f"memoryd {route}", f"{s['p50'] * 1000:.2f}", f"{s['p99'] * 1000:.2f}",
                     f"{cpu.get('loop', 0) * 1000:.2f}", f"{cpu.get('reader', 0) * 1000:.2f}",
                     f"{cpu.get('writer', 0) * 1000:.2f}", f"{cpu.get('index', 0) * 1000:.2f}",
                     f"{cpu.get('other', 0) * 1000:.2f}",
                     f"{sum(cpu.values()) * 1000:.2f}"])
        if bare:
            b = bare[route]
            sb = h.summary(b["wall"])
            rows.append([f"bare aiohttp {route}", f"{sb['p50'] * 1000:.2f}",
                         f"{sb['p99'] * 1000:.2f}", f"{b['cpu'].get('loop', 0) * 1000:.2f}",
                         "", "", "", "", f"{sum(b['cpu'].values()) * 1000:.2f}"])
    return h.table(rows, ["over the socket", "p50 ms", "p99 ms", "loop CPU ms",
                          "reader", "writer", "indexer", "other", "all CPU ms"])


def profiled_child(out: str, argv: list[str]) -> int:
    """`python loop_cpu.py --profiled-child OUT -m memoryd ARGS`: the daemon under
    cProfile timed by its main thread's CPU clock (the loop's waits in epoll cost
    nothing, as in the scheduler's account)."""
    import cProfile
    import runpy

    assert argv[:2] == ["-m", "memoryd"], argv
    sys.path.insert(0, str(h.ROOT))
    sys.argv = ["memoryd", *argv[2:]]
    prof = cProfile.Profile(time.thread_time)
    prof.enable()
    try:
        runpy.run_module("memoryd", run_name="__main__", alter_sys=True)
    except SystemExit:
        pass
    finally:
        prof.disable()
        prof.dump_stats(out)
    return 0


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--profiled-child"]:
        return profiled_child(argv[1], argv[2:])
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--files", type=int, default=20)
    p.add_argument("--lines", type=int, default=1000, help="lines per generated file")
    p.add_argument("--home", type=Path, help="a bigstore.py dir: serve a copy of its store")
    p.add_argument("--requests", type=int, default=200, help="of each kind")
    p.add_argument("--rounds", type=int, default=2, help="memoryd and bare, alternating")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--profile", action="store_true",
                   help="then cProfile the loop thread over the same requests")
    p.add_argument("--route", choices=("all", "health", "search", "context"), default="all",
                   help="the requests profiled")
    args = p.parse_args(argv)

    with h.short_dir() as sd:
        if args.home:
            run_home = sd / "home"
            from memoryd.paths import resolve_paths

            paths, built = resolve_paths(run_home), resolve_paths(args.home / "home")
            paths.ensure()
            shutil.copyfile(built.db, paths.db)
            shutil.copytree(built.data_dir / "index", paths.data_dir / "index")
            src = sd / "empty-src"
            src.mkdir()
            projects = [f"/bench/proj{i:02d}" for i in range(37)]
        else:
            info = h.corpus(args.files, args.lines, args.seed)
            run_home, src = sd / "home", Path(info.path)
            projects = sorted(str(d) for d in src.iterdir() if d.is_dir())
        with h.Memoryd(run_home, src, sd / "w.sock", log_path=sd / "warm.log",
                       env=ENV) as first:  # writes the bytecode cache
            first.wait_ready(300)
        d = h.Memoryd(run_home, src, sd / "m.sock", log_path=sd / "memoryd.log", env=ENV)
        bare_proc = None
        try:
            ready = d.wait_ready(300)
            ready_cpu = h.proc_cpu_s(d.proc.pid)
            st = d.wait_caught_up(600)
            pid = d.proc.pid
            print(f"{h.machine()}\nmemoryd ready in {ready:.2f} s ({ready_cpu:.2f} s CPU), "
                  f"{st['units']:,} units; "
                  f"load {os.getloadavg()[0]:.1f}")
            reqs = requests(args.requests, args.seed, projects)
            for route, body in reqs[:30]:  # warm: first-use loads, caches
                call(d.client, route, body)
            names = thread_names(pid)
            answers = {}
            for route in ROUTES:
                body = next(b for r, b in reqs if r == route)
                answers[route] = json.dumps(call(d.client, route, body))
            (sd / "answers.json").write_text(json.dumps(answers))
            (sd / "bare.py").write_text(BARE)
            bare_proc = subprocess.Popen([sys.executable, str(sd / "bare.py"),
                                          str(sd / "b.sock"), str(sd / "answers.json")])
            bare = MemorydClient(sd / "b.sock")
            deadline = time.monotonic() + 60
            while not (sd / "b.sock").exists() and time.monotonic() < deadline:
                time.sleep(0.05)
            for route, body in reqs[:30]:
                call(bare, route, body)
            bnames = {bare_proc.pid: "loop"}
            for rnd in range(args.rounds):
                load0 = os.getloadavg()[0]
                res = measure(d.client, pid, names, reqs)
                bres = measure(bare, bare_proc.pid, bnames, reqs)
                print(f"\nround {rnd + 1}, {args.requests} of each, load {load0:.1f}-"
                      f"{os.getloadavg()[0]:.1f}")
                print(table(res, bres))
            if args.profile:
                print()
                d.stop()
                only = [(r, b) for r, b in reqs if args.route in ("all", r.rsplit("/", 1)[1])]
                print(profile(run_home, src, sd, only, h.OUT / "loop_cpu.prof"))
        finally:
            if bare_proc is not None:
                bare_proc.terminate()
                bare_proc.wait(10)
            d.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
