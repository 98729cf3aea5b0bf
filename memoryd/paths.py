"""Where memoryd keeps its files.

platformdirs gives the per-OS locations; `MEMORYD_HOME` puts every one of them under
one directory (tests and benchmarks use it). This module imports nothing heavy:
memoryctl uses it on every call.
"""

from __future__ import annotations

import os
import stat
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

APP = "memoryd"
# sockaddr_un.sun_path is 108 bytes on Linux, 104 on macOS; keep a margin.
MAX_SOCKET_PATH = 100


class SocketPathTooLong(ValueError):
    pass


class UnsafeDirectoryError(PermissionError):
    """A folder memoryd would keep its socket in, that someone else could write or owns."""


@dataclass(frozen=True)
class Paths:
    config_dir: Path
    data_dir: Path
    state_dir: Path
    log_dir: Path
    runtime_dir: Path
    home: Path | None = None  # MEMORYD_HOME (or --home), which holds all of the above

    @property
    def config_file(self) -> Path:
        return self.config_dir / "config.toml"

    @property
    def db(self) -> Path:
        return self.data_dir / "memoryd.db"

    @property
    def memory_dir(self) -> Path:
        return self.data_dir / "memory"

    @property
    def socket(self) -> Path:
        return self.runtime_dir / "memoryd.sock"

    @property
    def lock(self) -> Path:
        return self.state_dir / "memoryd.lock"

    @property
    def token_file(self) -> Path:
        return self.state_dir / "token"

    @property
    def log_file(self) -> Path:
        return self.log_dir / "memoryd.log"

    def owned_dirs(self) -> tuple[Path, ...]:
        return (self.config_dir, self.data_dir, self.state_dir, self.log_dir, self.runtime_dir)

    def private_files(self) -> tuple[Path, ...]:
        db = str(self.db)
        return (self.db, Path(db + "-wal"), Path(db + "-shm"), Path(db + "-journal"),
                self.token_file, self.lock, self.log_file)

    def ensure(self) -> None:
        """Make memoryd's directories 0700 (and any missing parent: a home memoryd
        creates is the user's alone), its database 0600 before SQLite first opens it
        (the -wal and -shm files take the database's mode), and tighten those files when
        an older memoryd left them readable."""
        for d in self.owned_dirs():
            mkdir_private(d)
            if d == self.runtime_dir:
                check_runtime_dir(d)
            tighten_dir(d)
        os.close(os.open(self.db, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600))
        for f in self.private_files():
            try:
                if f.stat().st_mode & 0o077:
                    f.chmod(0o600)
            except FileNotFoundError:
                pass


def tighten_dir(d: Path) -> None:
    """Make one of memoryd's directories 0700 when an older memoryd (or a umask) left it
    readable. Never a shared directory: one that is sticky or writable by others (/tmp and its
    kind) or belongs to another user. Locking those would lock everyone else out of them (a
    socket configured as /tmp/memoryd.sock once turned /tmp into root's alone), and the files
    memoryd keeps there are 0600 in any case."""
    st = d.stat()
    if st.st_mode & (stat.S_ISVTX | 0o002) or st.st_uid != os.geteuid():
        return
    if st.st_mode & 0o077:
        d.chmod(0o700)


def check_runtime_dir(d: Path) -> None:
    """Refuse memoryd's runtime folder (where its socket goes) when it is not the user's
    alone: made beforehand by another user (in a shared $XDG_RUNTIME_DIR or /tmp, say), or
    writable by group or others. Either could put their own socket where memoryctl looks."""
    from memoryd.client import user_name as _user

    st = d.lstat()
    me = os.geteuid()
    if stat.S_ISLNK(st.st_mode) and st.st_uid != me:
        raise UnsafeDirectoryError(f"memoryd's runtime folder {d} is a symlink made by "
                                   f"{_user(st.st_uid)}: remove it and start memoryd again")
    st = d.stat()
    if st.st_uid != me:
        raise UnsafeDirectoryError(
            f"memoryd's runtime folder {d} belongs to {_user(st.st_uid)}, not to you: "
            "someone made it before memoryd did and could serve memoryctl in its place. "
            "Have it removed, or set MEMORYD_HOME / XDG_RUNTIME_DIR to a folder of your own")
    if st.st_mode & 0o022:
        raise UnsafeDirectoryError(
            f"memoryd's runtime folder {d} is writable by group or others (mode "
            f"{st.st_mode & 0o7777:04o}): anyone could put a socket there. Remove it (memoryd "
            f"makes it again, 0700) or `chmod 700 {d}`")


def mkdir_private(path: Path) -> None:
    """mkdir -p where every directory created is 0700 (mkdir's `parents` would make the
    missing parents with the umask's mode, often 0755)."""
    missing = []
    p = path
    while not p.exists():
        missing.append(p)
        p = p.parent
    for d in reversed(missing):
        try:
            d.mkdir(mode=0o700)
        except FileExistsError:
            pass
        else:
            d.chmod(0o700)  # mkdir's mode is masked by the umask


def resolve_paths(home: str | os.PathLike[str] | None = None,
                  environ: Mapping[str, str] = os.environ) -> Paths:
    """`home` (the --home flag) wins over MEMORYD_HOME, which wins over platformdirs."""
    home = home or environ.get("MEMORYD_HOME")
    if home:
        h = Path(home).expanduser().absolute()
        return Paths(h / "config", h / "data", h / "state", h / "log", h / "run", home=h)
    import platformdirs

    state = Path(platformdirs.user_state_dir(APP))
    runtime = _runtime_dir(environ) or state
    return Paths(
        config_dir=Path(platformdirs.user_config_dir(APP)),
        data_dir=Path(platformdirs.user_data_dir(APP)),
        state_dir=state,
        log_dir=Path(platformdirs.user_log_dir(APP)),
        runtime_dir=runtime,
    )


def _runtime_dir(environ: Mapping[str, str]) -> Path | None:
    """The per-user runtime dir, or None to fall back to the state dir. On Linux it is
    $XDG_RUNTIME_DIR/memoryd when that is set and writable (platformdirs would guess
    /run/user/<uid>, which containers and CI often lack, and warn about it)."""
    if sys.platform.startswith("linux"):
        base = environ.get("XDG_RUNTIME_DIR")
        if base and os.path.isdir(base) and os.access(base, os.W_OK):
            return Path(base) / APP
        return None
    import platformdirs

    d = Path(platformdirs.user_runtime_dir(APP))
    return d if d.parent.is_dir() and os.access(d.parent, os.W_OK) else None


def check_socket_path(path: Path) -> Path:
    if len(os.fsencode(str(path))) > MAX_SOCKET_PATH:
        raise SocketPathTooLong(
            f"socket path is {len(str(path))} bytes, over the {MAX_SOCKET_PATH}-byte limit of "
            f"Unix sockets: {path} (set --socket or MEMORYD_SOCKET to a shorter path)"
        )
    return path
