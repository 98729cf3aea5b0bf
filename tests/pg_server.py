"""A real PostgreSQL server for the tests: `initdb` + `pg_ctl` in a temporary directory,
listening on 127.0.0.1 on a free port, with password (scram) authentication, so the tests
talk to the database exactly as a fleet member would.

PostgreSQL refuses to run as root; when the tests run as root, the server runs as the
`postgres` system user (Debian's package creates it) or `nobody`.

`PgServer` is used directly by tests that stop and start their own server (outages);
everything else shares the session's server through the `pg_server` / `pg_url` fixtures
in conftest.
"""

from __future__ import annotations

import glob
import os
import pwd
import secrets
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path
from urllib.parse import quote

SUPERUSER = "memoryd_test"


def find_bindir() -> Path | None:
    """Where initdb and pg_ctl live: $PG_BINDIR, PATH, or Debian's versioned directory."""
    if env := os.environ.get("PG_BINDIR"):
        return Path(env)
    if found := shutil.which("initdb"):
        return Path(found).resolve().parent  # a symlink in /usr/local/bin: its real home
    candidates = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"),
                        key=lambda p: int(Path(p).parts[-3]) if Path(p).parts[-3].isdigit() else 0)
    return Path(candidates[-1]).parent if candidates else None


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _run_as() -> str | None:
    if os.geteuid() != 0:
        return None
    for name in ("postgres", "nobody"):
        try:
            pwd.getpwnam(name)
        except KeyError:
            continue
        return name
    raise RuntimeError("running as root and neither a postgres nor a nobody user exists")


def _reachable(directory: Path, user: str) -> bool:
    """Can `user` pass through `directory` (search permission on it and on every directory
    above it)? Asked of the kernel, as that user."""
    return subprocess.run(["test", "-x", str(directory)], user=user,
                          capture_output=True).returncode == 0


def _base_parent(user: str | None) -> Path:
    """Where the server's directory goes: the temp dir, unless the server's user cannot reach
    it (a root-only /tmp, mode 0700, happens on CI machines), then that user's home, then
    /var/tmp."""
    tmp = Path(tempfile.gettempdir())
    if user is None:
        return tmp
    candidates = [tmp, Path(pwd.getpwnam(user).pw_dir), Path("/var/tmp")]
    for c in candidates:
        if c.is_dir() and _reachable(c, user):
            return c
    raise RuntimeError(f"the {user} user can reach none of {', '.join(map(str, candidates))}; "
                       "set TMPDIR to a directory it can pass through")


class PgServer:
    def __init__(self, bindir: Path, base: Path | None = None) -> None:
        self.bindir = bindir
        self.user = _run_as()
        self.base = base or Path(tempfile.mkdtemp(prefix="memoryd-pg-",
                                                  dir=_base_parent(self.user)))
        self.datadir = self.base / "data"
        self.password = secrets.token_urlsafe(12)
        self.port = free_port()
        self.log = self.base / "server.log"

    def _chown(self, path: Path) -> None:
        if self.user:
            pw = pwd.getpwnam(self.user)
            os.chown(path, pw.pw_uid, pw.pw_gid)

    def _run(self, *args: str) -> subprocess.CompletedProcess[str]:
        done = subprocess.run(args, user=self.user, capture_output=True, text=True,
                              cwd=self.base, timeout=120)
        if done.returncode:  # say why: a bare CalledProcessError hides initdb's own words
            raise RuntimeError(f"{Path(args[0]).name} exited {done.returncode} as "
                               f"{self.user or 'this user'} in {self.base}:\n"
                               f"{done.stderr.strip()}\n{done.stdout.strip()[-2000:]}")
        return done

    def init(self) -> None:
        self.base.mkdir(parents=True, exist_ok=True)
        self._chown(self.base)
        self.base.chmod(0o700)
        pwfile = self.base / "pw"
        pwfile.write_text(self.password + "\n")
        self._chown(pwfile)
        self._run(str(self.bindir / "initdb"), "-D", str(self.datadir), "-U", SUPERUSER,
                  "--auth=scram-sha-256", f"--pwfile={pwfile}", "-E", "UTF8",
                  "--locale=C.UTF-8", "--no-sync")
        pwfile.unlink()
        with open(self.datadir / "postgresql.conf", "a") as conf:
            conf.write(
                f"\nlisten_addresses = '127.0.0.1'\nport = {self.port}\n"
                f"unix_socket_directories = '{self.base}'\n"
                "fsync = off\nsynchronous_commit = off\nfull_page_writes = off\n"
                "max_connections = 200\nshared_buffers = 64MB\n")

    def start(self) -> None:
        self._run(str(self.bindir / "pg_ctl"), "-D", str(self.datadir), "-l", str(self.log),
                  "-w", "-t", "120", "start")

    def stop(self, mode: str = "fast") -> None:
        if (self.datadir / "postmaster.pid").exists():
            self._run(str(self.bindir / "pg_ctl"), "-D", str(self.datadir), "-m", mode,
                      "-w", "-t", "120", "stop")

    def destroy(self) -> None:
        try:
            self.stop("immediate")
        finally:
            shutil.rmtree(self.base, ignore_errors=True)

    def url(self, dbname: str = "postgres", user: str = SUPERUSER,
            password: str | None = None) -> str:
        pw = self.password if password is None else password
        return f"postgresql://{quote(user)}:{quote(pw, safe='')}@127.0.0.1:{self.port}/{dbname}"

    def psql(self, sql: str, dbname: str = "postgres") -> str:
        """Run SQL as the superuser (setup and teardown that needs no driver)."""
        env = {**os.environ, "PGPASSWORD": self.password}
        done = subprocess.run(
            [str(self.bindir / "psql"), "-X", "-q", "-v", "ON_ERROR_STOP=1", "-At",
             "-h", "127.0.0.1", "-p", str(self.port), "-U", SUPERUSER, "-d", dbname,
             "-c", sql],
            check=True, capture_output=True, text=True, env=env, timeout=120)
        return done.stdout

    def create_database(self) -> str:
        name = "t_" + secrets.token_hex(6)
        self.psql(f'CREATE DATABASE "{name}"')
        return name

    def drop_database(self, name: str) -> None:
        self.psql(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def wait_until_ready(server: PgServer, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            server.psql("SELECT 1")
            return
        except subprocess.CalledProcessError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)
