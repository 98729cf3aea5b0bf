"""memoryctl's exit codes, and how it ends when the reader of its output has gone.

Shared by the fast entry (`memoryd.cli.memoryctl`) and the argparse commands; standard
library only, imported on every hook call."""

import os
import sys

EXIT_OK, EXIT_ERROR, EXIT_USAGE, EXIT_NOT_RUNNING, EXIT_MISMATCH = 0, 1, 2, 3, 4
# `memoryctl ... | head`: the reader left. 128 + SIGPIPE, what a shell reports for git or
# coreutils cut off the same way, so `set -o pipefail` scripts see memoryctl as they see
# any other tool, and a cut-off listing is not mistaken for a complete one.
EXIT_CLOSED_STDOUT = 141


def stdout_closed() -> bool:
    """True when stdout is a pipe or socket whose reader has gone: poll reports an error
    or hang-up on the writing end (Linux: POLLERR; macOS and the BSDs: POLLHUP)."""
    import select

    try:
        fd = sys.stdout.fileno()
    except (AttributeError, ValueError, OSError):  # replaced or closed by a caller
        return False
    p = select.poll()
    p.register(fd, select.POLLOUT)
    return any(ev & (select.POLLERR | select.POLLHUP) for _, ev in p.poll(0))


def closed_stdout() -> int:
    """Point stdout at /dev/null (the interpreter flushes it at exit, which would raise
    again and print a traceback) and give the exit code."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):
        pass
    return EXIT_CLOSED_STDOUT
