"""bench/fleet.py --part backfill: four daemons backfilling into one PostgreSQL at once
against one alone, in paired runs (see bench/fleet.py's docstring and bench/README)."""

from __future__ import annotations

import contextlib
import os
import time
from typing import Any

import harness as h
from pg_sample import PgSampler, proc_cpu_s, proc_sched_s, server_cpu_s, server_sched_s

from tests.pg_server import PgServer, find_bindir, wait_until_ready


def backfill(files: int, lines: int, daemons: int, repeats: int = 3,
             wait_indexed: bool = False, sessions: tuple[str, ...] = ("own", "shared")
             ) -> None:
    """Paired runs: in each repeat one daemon alone and `daemons` at once (the order
    alternates between repeats, so a load that drifts weighs on both sides), each phase
    in a fresh database and fresh homes, so every phase starts from an empty namespace.
    The ratio is taken within each pair; its median and spread are the figure. Each of
    `sessions` runs its own pairs, in turn within a repeat: `own` starts every daemon in
    a session of its own, `shared` all in the bench's (see bench/fleet.py)."""
    import shutil
    import statistics



    info = h.corpus(files, lines, 1)
    print(f"corpus: {info.files} files, {info.lines:,} lines, {info.bytes / 1e6:.0f} MB; "
          f"cores: {os.cpu_count()}; {repeats} paired repeats")
    for path in h.corpus_files(info.path):
        path.read_bytes()
    server = PgServer(find_bindir())
    server.init()
    server.start()
    work = h.OUT / "fleet-backfill-run"
    shutil.rmtree(work, ignore_errors=True)
    try:
        wait_until_ready(server)
        roots = []
        for i in range(daemons):  # each daemon its own transcript root
            root = work / f"root{i}"
            shutil.copytree(info.path, root)
            roots.append(root)
        # bytecode cached as on any installed machine: this machine sets
        # PYTHONDONTWRITEBYTECODE, which made every daemon compile memoryd and its
        # libraries afresh at start (seconds of CPU each, four times over at once)
        py_env = {"PYTHONDONTWRITEBYTECODE": "", "PYTHONPYCACHEPREFIX": str(work / "pycache")}
        (work / "empty").mkdir()
        with h.short_dir() as sd:  # warm the cache: one daemon started and stopped
            for i, what in enumerate(("warming the bytecode cache", "cached")):
                url = server.url(server.create_database())
                t0 = time.perf_counter()
                with h.Memoryd(work / f"home-warm{i}", work / "empty", sd / "w.sock",
                               env={"MEMORYD_STORE__URL": url, **py_env}) as d:
                    d.wait_caught_up(timeout=600, interval=0.1)
                    print(f"a daemon's start on an empty root ({what}): "
                          f"{time.perf_counter() - t0:.1f} s to caught_up, "
                          f"{proc_cpu_s(d.proc.pid):.1f} CPU s", flush=True)

        def phase(tag: str, names: list[str], own: bool) -> dict[str, Any]:
            """Spawn the daemons at once into a new database: the time until PostgreSQL
            holds all their units (ingest), then (wait_indexed) until every daemon's
            index holds the whole namespace."""
            import psycopg

            url = server.url(server.create_database())
            want = len(names) * info.lines
            load0 = os.getloadavg()[0]
            cpu0, t0 = server_cpu_s(server), time.perf_counter()
            with h.short_dir() as sd, PgSampler(url) as sampler:
                ds = [h.Memoryd(work / f"home-{tag}-{n}", roots[i], sd / f"{i}.sock",
                                log_path=work / f"{tag}-{n}.log",
                                env={"MEMORYD_STORE__URL": url, "MEMORYD_STORE__MACHINE": n,
                                     **py_env}, new_session=own)
                      for i, n in enumerate(names)]
                try:
                    n = 0
                    with psycopg.connect(url, autocommit=True) as c:
                        while n < want:
                            for d in ds:
                                d._alive()
                            time.sleep(0.25)
                            with contextlib.suppress(psycopg.Error):  # the schema first
                                n = c.execute("SELECT count(*) FROM memoryd_default.units"
                                              ).fetchone()[0]
                            if time.perf_counter() - t0 > 7200:
                                raise TimeoutError(f"{n} of {want} units stored")
                    ingest_s = time.perf_counter() - t0
                    ingest_cpu = server_cpu_s(server) - cpu0
                    own = sum(proc_cpu_s(d.proc.pid) for d in ds)
                    # ran vs waited for a CPU (run queue): the rest of a thread's time it
                    # slept (a round trip, a queue, a timer, the GIL)
                    sched = [proc_sched_s(d.proc.pid) for d in ds]
                    srv = server_sched_s(server)
                    waits = sampler.summary()
                    indexed_s = None
                    if wait_indexed:
                        for d in ds:
                            d.wait_caught_up(timeout=7200, interval=0.5)
                        indexed_s = time.perf_counter() - t0
                finally:
                    for d in ds:
                        d.stop()
            return {"daemons": len(names), "units": want, "ingest_s": ingest_s,
                    "rate": want / ingest_s, "pg": ingest_cpu / ingest_s, "own": own,
                    "indexed_s": indexed_s,
                    "ran": sum(r for r, _ in sched), "runq": sum(w for _, w in sched),
                    "srv_runq": srv[1], "load": (load0, os.getloadavg()[0]), **waits}

        runs: list[dict[str, Any]] = []
        ratios: dict[str, list[float]] = {mode: [] for mode in sessions}
        for r in range(repeats):
            order = [1, daemons] if r % 2 == 0 else [daemons, 1]
            modes = sessions if r % 2 == 0 else sessions[::-1]
            for mode in modes:
                pair = {k: phase(f"r{r}{mode}d{k}", ["solo"] if k == 1 else
                                 [f"m{i}" for i in range(k)], mode == "own") for k in order}
                ratios[mode].append(pair[daemons]["rate"] / pair[1]["rate"])
                for k in order:
                    runs.append({"repeat": r, "sessions": mode, **pair[k]})
                print(f"repeat {r}, sessions {mode}: {daemons} ÷ 1 = "
                      f"{ratios[mode][-1]:.2f}x", flush=True)
        rows = [[str(x["repeat"]), x["sessions"], str(x["daemons"]), f"{x['units']:,}",
                 f"{x['ingest_s']:.1f}",
                 f"{x['rate']:,.0f}", f"{100 * x['pg']:.0f}%", f"{x['own']:.1f}",
                 f"{x['ran']:.1f} / {x['runq']:.1f}", f"{x['srv_runq']:.1f}",
                 f"{x['load'][0]:.1f} / {x['load'][1]:.1f}", f"{x['in_tx']:.2f}",
                 f"{100 * x['lock_share']:.0f}%", x["top"], x["blocked"]]
                + ([f"{x['indexed_s']:.1f}"] if wait_indexed else []) for x in runs]
        print(h.table(rows, ["repeat", "sessions", "daemons", "units", "stored s", "units/s",
                             "PG CPU (of a core)", "daemons' CPU s",
                             "daemons ran / waited for a CPU s", "PG waited for a CPU s",
                             "load before / after",
                             "backends in a tx", "lock waits", "backends' time",
                             "locks not granted"]
                      + (["all indexed s"] if wait_indexed else [])))
        for mode, rs in ratios.items():
            print(f"sessions {mode}: {daemons} daemons / 1 daemon, units stored per second, "
                  f"per pair: {', '.join(f'{x:.2f}x' for x in rs)}; median "
                  f"{statistics.median(rs):.2f}x, spread {min(rs):.2f}-{max(rs):.2f}x "
                  f"(goal >= 1.5x); cores: {os.cpu_count()}")
    finally:
        server.stop()
        server.destroy()
        shutil.rmtree(work, ignore_errors=True)
