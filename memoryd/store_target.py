"""Which store a daemon opens: the embedded SQLite file, or a namespace in a shared
PostgreSQL database (`[store] url`, DESIGN §11). Nothing here needs the driver.

The password may sit in the URL, in `PGPASSWORD`, in `~/.pgpass` (libpq reads those)
or in `[store] password_file`; it is never shown: `masked_url()` is what status, logs
and errors print, and `scrub()` takes it out of the driver's own messages.
"""

from __future__ import annotations

import os
import re
import socket
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import parse_qsl, quote, urlencode, urlsplit, urlunsplit

SCHEMES = ("postgresql", "postgres")
NAMESPACE = re.compile(r"[a-z_][a-z0-9_]{0,39}")
MASK = "***"
_SECRET_PARAMS = {"password", "sslpassword"}


def is_postgres(url: str) -> bool:
    return urlsplit(url.strip()).scheme.lower() in SCHEMES


def check_url(url: str) -> str:
    """'' or 'sqlite' (the embedded store) or a postgresql:// URL; the error never
    quotes the URL (it may hold the password)."""
    url = url.strip()
    if url in ("", "sqlite") or is_postgres(url):
        return url
    raise ValueError("expected empty, 'sqlite' or a postgresql://user@host/dbname URL")


def refuse_password_in_flag(url: str, flag: str) -> None:
    """A password in a command-line flag is readable by every local user for as long as
    the process runs (`/proc/PID/cmdline`, `ps`), and was already in the shell's history
    and the parent's view before anything could scrub it: refuse it (ValueError, never
    quoting the URL) and say where a password belongs."""
    if is_postgres(url) and url_secrets(url):
        raise ValueError(
            f"{flag}: the URL carries a password, which every local user could read in "
            "this process's command line (/proc/PID/cmdline, ps); give the URL without it "
            "and put the password in [store] password_file (MEMORYD_STORE__PASSWORD_FILE), "
            "PGPASSWORD or ~/.pgpass")


def check_namespace(ns: str) -> str:
    if not NAMESPACE.fullmatch(ns):
        raise ValueError(f"{ns!r} is not a namespace name: lowercase letters, digits and _, "
                         "starting with a letter or _, at most 40 characters (it names "
                         "the PostgreSQL schema memoryd_<namespace>)")
    return ns


def masked_url(url: str) -> str:
    """The URL as it may be shown: any password (in the authority or a `password=`
    parameter) replaced by ***."""
    if not is_postgres(url):
        return url.strip() or "sqlite"
    parts = urlsplit(url.strip())
    netloc = parts.netloc
    if "@" in netloc:
        auth, _, hosts = netloc.rpartition("@")
        user, sep, _pw = auth.partition(":")
        netloc = f"{user}:{MASK}@{hosts}" if sep else f"{user}@{hosts}"
    query = parts.query
    if query:
        pairs = [(k, MASK if k.lower() in _SECRET_PARAMS else v)
                 for k, v in parse_qsl(query, keep_blank_values=True)]
        query = urlencode(pairs, safe="*")
    return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))


def url_secrets(url: str) -> list[str]:
    """The password(s) the URL carries, raw and percent-encoded (to scrub both)."""
    from urllib.parse import unquote

    out: list[str] = []
    parts = urlsplit(url.strip())
    if parts.password:
        out += [parts.password, unquote(parts.password)]
    for k, v in parse_qsl(parts.query, keep_blank_values=True):
        if k.lower() in _SECRET_PARAMS and v:
            out += [v, quote(v, safe="")]
    return out


@dataclass(frozen=True)
class StoreTarget:
    """Where the truth lives. `url` '' or 'sqlite': the SQLite file in the daemon's home."""

    url: str = ""
    namespace: str = "default"
    machine: str = field(default_factory=socket.gethostname)
    password_file: Path | None = None

    @property
    def kind(self) -> str:
        return "postgresql" if is_postgres(self.url) else "sqlite"

    @property
    def schema(self) -> str:
        return f"memoryd_{check_namespace(self.namespace)}"

    def masked(self) -> str:
        return masked_url(self.url)

    def password(self) -> str | None:
        """The password from `password_file` (first line), if one is configured."""
        if self.password_file is None:
            return None
        from memoryd.errors import StoreError

        try:
            text = self.password_file.expanduser().read_text(encoding="utf-8")
        except OSError as e:
            raise StoreError(f"cannot read [store] password_file {self.password_file}: "
                             f"{e.strerror or e}") from None
        return text.splitlines()[0] if text.strip() else None

    def secrets(self) -> list[str]:
        found = url_secrets(self.url)
        if pw := os.environ.get("PGPASSWORD"):
            found.append(pw)
        try:
            if pw := self.password():
                found.append(pw)
        except Exception:  # an unreadable file has no secret to hide
            pass
        return [s for s in found if s]

    def scrub(self, text: str) -> str:
        """`text` (a driver's error, say) with the URL masked and every password gone."""
        if self.url:
            text = text.replace(self.url.strip(), self.masked())
        for s in sorted(set(self.secrets()), key=len, reverse=True):
            text = text.replace(s, MASK)
        return text
