"""`python -m memoryd.move`: see `memoryd.move.migrate`."""

import sys

from memoryd.move.migrate import main

sys.exit(main())
