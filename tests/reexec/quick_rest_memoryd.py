"""`python tests/reexec/quick_rest_memoryd.py <memoryd args>`: memoryd whose index writer
lets go 0.2 s after its last work and whose idle release runs 0.5 s after that, so a test
sees the daemon at rest within seconds instead of a minute. A re-exec runs this same
script again (`sys.orig_argv`), so the next image rests as quickly."""

import sys

from memoryd.cli.memoryd import main
from memoryd.runtime.idle_release import RELEASE
from memoryd.index import indexer

indexer.WRITER_IDLE_S = 0.2
RELEASE.after_s = 0.5

raise SystemExit(main(sys.argv[1:]))
