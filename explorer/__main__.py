"""``python -m explorer``: the same as ``gpt-explorer``."""

import sys

from .cli import main

sys.exit(main())
