"""``python -m helpers.bench``: see ``helpers.bench.cli``."""

import contextlib
import sys

from helpers.bench.cli import main

with contextlib.suppress(BrokenPipeError):
    sys.exit(main())
