"""Which session a transcript file belongs to, when its agent writes no session id.

Generic and nanobot files name their session by their path under the source root
(`start` sets `path_session`). Two roots may each hold a `chat.jsonl`, so a new file
whose path key is already owned by another file gets the key qualified with a hash of
its root (another machine's files are other sessions anyway: a session belongs to
its machine in fleet mode, `memoryd.store.sessions.session_pk`); the key is then kept in the file's cursor state for good, so a later rename,
move or rewrite of the same file stays the same session. A rename is recognised by the
file's inode plus the hash of the prefix we had read (`adopt_moved`): the old cursor
follows the file, so nothing is read, or stored, twice.
"""

from __future__ import annotations

import hashlib
import sqlite3
import time

from memoryd.ingest.adapters.base import FileState

PATH_SESSION = "path_session"  # state flag: the session id came from the file's path
_CHECKED = "session_checked"


def root_tag(root: str) -> str:
    return hashlib.blake2b(root.encode("utf-8", "surrogateescape"), digest_size=4).hexdigest()


def claim_session(conn: sqlite3.Connection, agent: str, path: str, root: str,
                  state: FileState, machine: str = "") -> str | None:
    """On a file's first write: qualify a path-derived session id another file owns.
    Returns the id it replaced (records parsed before carry it), else None."""
    if not state.get(PATH_SESSION) or state.get(_CHECKED):
        return None
    sid = str(state.get("session_id"))
    taken = conn.execute(
        "SELECT 1 FROM files WHERE agent = ? AND machine = ? AND path != ? "
        "AND state ->> 'session_id' = ? LIMIT 1", (agent, machine, path, sid)).fetchone()
    state[_CHECKED] = True
    if taken:
        state["session_id"] = f"{sid}@{root_tag(root)}"
        return sid
    return None


def keep_session(old: FileState, new: FileState) -> FileState:
    """A rewritten file is read again from the top: it keeps the session it had."""
    if old.get(PATH_SESSION) and old.get("session_id"):
        new["session_id"] = old["session_id"]
        new[_CHECKED] = True
    return new


def move_cursor(conn: sqlite3.Connection, old_path: str, new_path: str, root: str,
                machine: str = "") -> None:
    conn.execute("DELETE FROM files WHERE machine = ? AND path = ? AND agent IS NULL",
                 (machine, new_path))
    conn.execute("UPDATE files SET path = ?, root = ?, gone = 0, updated_at = ? "
                 "WHERE machine = ? AND path = ?",
                 (new_path, root, time.time(), machine, old_path))
