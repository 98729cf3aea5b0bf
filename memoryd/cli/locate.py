"""Where memoryctl finds the daemon's socket: --socket, $MEMORYD_SOCKET, the config's
`[server] socket`, or the home's default, worked out from strings for the usual cases so
a hook's call imports neither pathlib nor platformdirs (`memoryd.paths` decides the rest).
Standard library only."""

import os
import sys

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any


def socket_path(socket: "str | None", home: "str | None") -> str:
    """--socket, $MEMORYD_SOCKET, the config's [server] socket, or the home's default."""
    if socket:
        return str(socket)
    if os.environ.get("MEMORYD_SOCKET"):
        return os.environ["MEMORYD_SOCKET"]
    got = plain_dirs(home, os.environ)
    if got is None:  # anything unusual: memoryd.paths decides (pathlib, platformdirs)
        from memoryd.paths import resolve_paths

        paths = resolve_paths(home)
        config, sock = str(paths.config_file), str(paths.socket)
    else:
        config, sock = got
    return configured_socket(config) or sock


def plain_dirs(home: "str | None", environ: "Any") -> "tuple[str, str] | None":
    """(config file, default socket) as `memoryd.paths.resolve_paths` places them, from
    strings alone, for the usual cases: a home (--home, $MEMORYD_HOME), or Linux's XDG
    defaults. None for the rest (another OS, a relative $HOME, a path Path would
    normalize), which the caller leaves to `memoryd.paths`. Importing memoryd.paths costs
    dataclasses (inspect, re), pathlib and platformdirs (tempfile, shutil, fnmatch): more
    than the rest of this process's imports together. Tested equal to resolve_paths."""
    home = home or environ.get("MEMORYD_HOME")
    if home:
        h = os.path.expanduser(home)
        h = h if h.startswith("/") else os.getcwd() + "/" + h
        return _plain(h + "/config/config.toml", h + "/run/memoryd.sock")
    if not sys.platform.startswith("linux") or hasattr(sys, "getandroidapilevel") \
            or "ANDROID_DATA" in environ or not environ.get("HOME", "/").startswith("/"):
        return None
    config = _xdg(environ, "XDG_CONFIG_HOME", "~/.config")
    state = _xdg(environ, "XDG_STATE_HOME", "~/.local/state")
    base = environ.get("XDG_RUNTIME_DIR")
    run = base + "/memoryd" if base and os.path.isdir(base) and os.access(base, os.W_OK) \
        else state
    return _plain(config + "/config.toml", run + "/memoryd.sock")


def _xdg(environ: "Any", name: str, default: str) -> str:
    base = environ.get(name, "")
    return (base if base.startswith("/") else os.path.expanduser(default)) + "/memoryd"


def _plain(config: str, sock: str) -> "tuple[str, str] | None":
    """Both paths when str(Path(p)) is the same string for each, else None."""
    for p in (config, sock):
        if not p.startswith("/") or "//" in p or "/./" in p or "/../" in p:
            return None
    return config, sock


def configured_socket(config: str) -> "str | None":
    if not os.path.exists(config):
        return None
    import tomllib

    try:
        with open(config, "rb") as f:
            sock = tomllib.load(f).get("server", {}).get("socket")
    except (OSError, ValueError):
        return None
    return os.path.expanduser(sock) if isinstance(sock, str) else None
