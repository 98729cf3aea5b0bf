"""MEMORY.md's entries by meaning (issue 31): each entry's vector, kept in the daemon's
memory, so a context ranks the long-term section by the query's meaning as well as its
words (`memoryd.recall.long_term`).

This wing sees an entry as the text embedded of it (`memoryd.recall.long_term.text_of`:
its items), and keys its vector by that text, so an entry edited is embedded again and
one moved or re-dated is not. The embed worker follows the file (`follow`: its entries'
texts, newest first, what lacks a vector pending) and embeds what is pending before any
unit (a few hundred at most, ~45 ms each on one core: 9 s for a full file of 200, each
in a quiet moment). Nothing is stored: after a restart the worker embeds the file again,
where a table would need a schema in both stores and its own upkeep as entries come and
go. A context never waits for an entry to be embedded: one without a vector is ranked by
its words, as without the extra.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence


class EntryVectors:
    def __init__(self) -> None:
        self._vecs: dict[str, bytes] = {}  # an entry's text -> its int8 vector
        self.pending: list[str] = []  # the file's texts without one, newest first

    def __len__(self) -> int:
        return len(self._vecs)

    def follow(self, texts: Iterable[str]) -> None:
        """The file as it is now (its entries' texts, newest first): vectors of texts no
        longer in it are dropped, those without one are pending."""
        now = list(dict.fromkeys(texts))
        keep = set(now)
        self._vecs = {t: v for t, v in self._vecs.items() if t in keep}
        self.pending = [t for t in now if t not in self._vecs]

    def add(self, texts: list[str], vecs: list[bytes]) -> None:
        for t, v in zip(texts, vecs):
            self._vecs[t] = v
        done = set(texts)
        self.pending = [t for t in self.pending if t not in done]

    def of(self, texts: Sequence[str]) -> list[tuple[int, bytes]]:
        """(index in `texts`, vector) of the texts that have one."""
        return [(i, v) for i, t in enumerate(texts) if (v := self._vecs.get(t)) is not None]
