"""What a running memoryd holds in memory, by kind: a wrapper that runs the daemon in
this process and answers SIGUSR2 with a report written to a file (bench/idle.py's
`--probe`; the daemon itself is unchanged).

    python bench/memprobe.py OUT.json -m memoryd --home ... # then kill -USR2 <pid>

The report (one JSON object per signal, appended to OUT.json):
  malloc    glibc's arenas from `malloc_info`: per arena the bytes it holds from the OS
            (`mmap`/`sbrk` `size`) and the free bytes in it (`fast`/`rest`), so what a
            `malloc_trim` could give back and what is in use;
  python    the bytes Python's allocator has in use (`sys._debugmallocstats` is too
            slow): tracemalloc's total and its 25 largest allocation sites when
            tracemalloc runs (`-X tracemalloc` before the script), and the count of live
            objects by type (the 15 commonest);
  smaps     /proc/self/smaps summed by kind (`smaps_kinds`).

Linux and glibc only.
"""

from __future__ import annotations

import collections
import ctypes
import ctypes.util
import gc
import json
import os
import re
import runpy
import signal
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # this tree's memoryd

ARENA = 64 << 20  # glibc's HEAP_MAX_SIZE on 64-bit: a thread arena's reserved span


def smaps_kinds(pid: int | str = "self", index_root: str = "") -> dict[str, float]:
    """Resident MB of a process by kind of mapping: the main heap (`[heap]`), glibc
    thread arenas (anonymous 64 MiB-aligned spans), other anonymous memory (Python's
    arenas, large mallocs, tantivy's mmaps), thread stacks, index files, other files."""
    out: collections.Counter[str] = collections.Counter()
    head: list[str] | None = None
    arena_end = 0
    with open(f"/proc/{pid}/smaps") as f:
        for line in f:
            if re.match(r"^[0-9a-f]+-[0-9a-f]+ ", line):
                head = line.split(maxsplit=5)
                continue
            if not line.startswith("Rss:") or head is None:
                continue
            kb = int(line.split()[1])
            lo, hi = (int(x, 16) for x in head[0].split("-"))
            path = head[5].strip() if len(head) > 5 else ""
            if path == "[heap]":
                kind = "heap (main arena)"
            elif path.startswith("[stack"):
                kind = "stacks"
            elif path.startswith("/"):
                kind = "index files" if index_root and path.startswith(index_root) \
                    else "other files"
            elif path:
                kind = "other"
            elif lo % ARENA == 0 and hi - lo <= ARENA:
                kind, arena_end = "thread arenas", lo + ARENA
            elif lo < arena_end:
                kind = "thread arenas"
            elif hi - lo in (8 << 20, (8 << 20) + 4096) or head[1] == "---p":
                kind = "stacks"
            else:
                kind = "anonymous (Python, mmaps)"
            out[kind] += kb
    return {k: round(v / 1024, 1) for k, v in sorted(out.items())}


def malloc_arenas() -> list[dict[str, int]]:
    """glibc's arenas: bytes mapped from the OS and free bytes in each (`malloc_info`)."""
    libc = ctypes.CDLL(ctypes.util.find_library("c"))
    libc.fopen.restype = ctypes.c_void_p
    libc.fopen.argtypes = [ctypes.c_char_p, ctypes.c_char_p]
    libc.fclose.argtypes = [ctypes.c_void_p]
    libc.malloc_info.argtypes = [ctypes.c_int, ctypes.c_void_p]
    with tempfile.NamedTemporaryFile(suffix=".xml") as tmp:
        fp = libc.fopen(tmp.name.encode(), b"w")
        libc.malloc_info(0, fp)
        libc.fclose(fp)
        xml = open(tmp.name).read()
    arenas = []
    for heap in re.findall(r'<heap nr="\d+">(.*?)</heap>', xml, re.S):
        free = sum(int(x) for x in re.findall(r'<total type="(?:fast|rest)" count="\d+" '
                                               r'size="(\d+)"', heap))
        size = sum(int(x) for x in re.findall(r'<system type="current" size="(\d+)"', heap))
        arenas.append({"system": size, "free": free})
    return arenas


def report(path: str) -> None:
    gc.collect()
    kinds = collections.Counter(type(o).__name__ for o in gc.get_objects())
    out: dict[str, object] = {
        "t": time.time(), "threads": len(os.listdir("/proc/self/task")),
        "smaps": smaps_kinds(), "objects": kinds.most_common(15),
        "gc_objects": sum(kinds.values())}
    try:
        ar = malloc_arenas()
        out["malloc"] = {"arenas": len(ar), "system_mb": round(sum(a["system"] for a in ar)
                                                                 / 2**20, 1),
                         "free_mb": round(sum(a["free"] for a in ar) / 2**20, 1),
                         "each": [(round(a["system"] / 2**20, 1), round(a["free"] / 2**20, 1))
                                  for a in ar]}
    except (OSError, AttributeError) as e:
        out["malloc"] = str(e)
    if tracemalloc.is_tracing():
        snap = tracemalloc.take_snapshot()
        stats = snap.statistics("lineno")
        out["traced_mb"] = round(sum(s.size for s in stats) / 2**20, 1)
        out["top"] = [(str(s.traceback[0]), round(s.size / 2**20, 2), s.count)
                      for s in stats[:25]]
    with open(path, "a") as f:
        f.write(json.dumps(out) + "\n")


def main() -> None:
    path = sys.argv[1]
    assert sys.argv[2:4] == ["-m", "memoryd"], sys.argv
    sys.argv = ["memoryd", *sys.argv[4:]]
    signal.signal(signal.SIGUSR2, lambda *_: report(path))
    runpy.run_module("memoryd", run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main()
