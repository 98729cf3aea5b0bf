"""The inotify doorbell at the kernel's limits (issue 28 item 12): a tree ~1,000 deep is
walked without recursion and the descriptor never leaks; out of inotify instances, the
watch polls and says why. Real directories, a real child process for the fd limit."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from memoryd.ingest import inotify_wake

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"),
                                reason="inotify is Linux's")


def _open_fds() -> int:
    """This process's inotify descriptors: what `arm` opens. All descriptors would count
    the ones other threads of the test process open and close meanwhile (seen once under
    load: 179 against 178)."""
    n = 0
    for fd in os.listdir("/proc/self/fd"):
        try:
            n += os.readlink(f"/proc/self/fd/{fd}") == "anon_inode:inotify"
        except OSError:  # closed since the listing
            pass
    return n


def _deep(top: Path, depth: int) -> None:
    fd = os.open(top, os.O_RDONLY)
    try:
        for _ in range(depth):  # relative steps: no path grows past PATH_MAX
            os.mkdir("d", dir_fd=fd)
            nxt = os.open("d", os.O_RDONLY, dir_fd=fd)
            os.close(fd)
            fd = nxt
    finally:
        os.close(fd)


def _undeep(top: Path, depth: int) -> None:
    """Remove what `_deep` made, deepest first, without recursion: pytest's clean-up of
    old temporary folders (shutil.rmtree, recursive in Python 3.11) overflowed the stack
    on it and ended a later session with a RecursionError."""
    fds = [os.open(top, os.O_RDONLY)]
    try:
        for _ in range(depth - 1):
            fds.append(os.open("d", os.O_RDONLY, dir_fd=fds[-1]))
        while fds:
            fd = fds.pop()
            os.rmdir("d", dir_fd=fd)
            os.close(fd)
    finally:
        for fd in fds:
            os.close(fd)


@pytest.fixture
def deep_tree(tmp_path):
    _deep(tmp_path, 1000)
    yield tmp_path
    _undeep(tmp_path, 1000)


def test_issue_28_a_deep_tree_neither_recurses_nor_leaks_the_descriptor(deep_tree,
                                                                        monkeypatch):
    tmp_path = deep_tree
    before = _open_fds()
    wake = inotify_wake.arm((tmp_path,))  # os.walk raised RecursionError here
    assert wake is not None and wake.dirs == 1001
    wake.close()
    assert _open_fds() == before
    monkeypatch.setattr(inotify_wake, "MAX_DIRS", 500)  # refused half-way: closed
    assert inotify_wake.arm((tmp_path,)) is None
    assert _open_fds() == before


def test_issue_28_out_of_inotify_instances_the_watch_polls_and_says_so(tmp_path):
    child = Path(__file__).with_name("emfile_child.py")
    out = subprocess.run([sys.executable, str(child), str(tmp_path)], capture_output=True,
                         text=True, timeout=120, check=True).stdout
    assert f"GOT ['{tmp_path / 'a.jsonl'}']" in out
    assert "no inotify instances left" in out and "polls instead" in out
