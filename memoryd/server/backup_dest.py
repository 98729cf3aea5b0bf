"""Where `POST /v1/backup` may write a copy of everything memoryd holds.

The rule, so that an API call cannot drop the whole history somewhere another user can
read it, or trick the daemon into writing through someone else's symlink:

1. the path is absolute and names a file that does not exist yet;
2. its folder (symlinks resolved) is inside the user's home directory or memoryd's own
   (MEMORYD_HOME, which memoryd makes 0700, else its data directory);
3. that folder belongs to the user memoryd runs as and is not writable by group or
   others (so not /tmp, not a shared folder);
4. the copy is created here, exclusively (never following a symlink), with mode 0600,
   before SQLite writes into it.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Sequence
from pathlib import Path

from memoryd.errors import BadRequestError, ConflictError

RULE = ("backups go to a new file in a folder of your own (not writable by others) under "
        "your home directory or memoryd's own")


def create_backup_file(raw: str, roots: Sequence[Path]) -> Path:
    """Check `raw` against the rule and create it empty with mode 0600 (blocking IO:
    call it in a thread). Raises BadRequestError/ConflictError naming `path`."""
    if "\x00" in raw or not raw.startswith("/"):
        raise BadRequestError("path must be an absolute path", field="path")
    dest = Path(raw)
    if dest.name in ("", ".", ".."):
        raise BadRequestError("path must name a file", field="path")
    try:
        folder = dest.parent.resolve(strict=True)
        st = folder.stat()
    except (FileNotFoundError, NotADirectoryError):
        raise BadRequestError(f"no such folder: {dest.parent}", field="path") from None
    except (OSError, RuntimeError) as e:  # RuntimeError: a symlink loop
        raise BadRequestError(f"cannot use {dest.parent}: {e}", field="path") from None
    if not stat.S_ISDIR(st.st_mode):
        raise BadRequestError(f"not a folder: {dest.parent}", field="path")
    real_roots = [r.resolve() for r in roots]
    if not any(folder == r or folder.is_relative_to(r) for r in real_roots):
        raise BadRequestError(f"{folder} is outside " + " and ".join(map(str, real_roots))
                              + f": {RULE}", field="path")
    if st.st_uid != os.geteuid() or st.st_mode & 0o022:
        raise BadRequestError(f"{folder} is not yours alone: {RULE}", field="path")
    target = folder / dest.name
    try:
        fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    except FileExistsError:
        raise ConflictError(f"{dest} exists; refusing to overwrite it", field="path") from None
    except OSError as e:
        raise BadRequestError(f"cannot create {dest}: {e.strerror}", field="path") from None
    os.close(fd)
    return target
