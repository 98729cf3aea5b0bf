"""What the store asks of what follows its writes (the search index, local or the fleet's):
to be woken after a write that may concern it, to say whether it has caught up, to be
held while someone waits for it, and to be closed before the store's threads stop.

The store rings this doorbell and nothing more; it neither builds nor knows the index
(`memoryd.index`, `memoryd.fleet.follow_index`): the daemon builds one and hands it to
the store (`Store.follow`) and to recall, which search it.
"""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Iterator
from typing import Any, Protocol


class WriteFollower(Protocol):
    def notify_write(self) -> None:
        """A write committed (or rolled back) that may have added units or queued index
        changes: look at the store again."""
        ...

    def is_caught_up(self, conn: sqlite3.Connection) -> bool:
        """Whether everything committed so far (as `conn`, a store reader, sees it) is
        searchable."""
        ...

    def waited(self) -> contextlib.AbstractContextManager[Any]:
        """Held while a caller waits for everything to be searchable (`Store.indexed`)."""
        ...

    def close(self) -> None:
        ...


class NoFollower:
    """What a store follows until it is handed its index: nothing to wake."""

    def notify_write(self) -> None:
        pass

    def is_caught_up(self, conn: sqlite3.Connection) -> bool:
        return True

    @contextlib.contextmanager
    def waited(self) -> Iterator[None]:
        yield

    def close(self) -> None:
        pass
