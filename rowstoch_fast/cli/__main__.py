"""``python -m rowstoch_fast.cli``: the ``rowstoch`` command."""

import sys

from . import main

if __name__ == "__main__":
    sys.exit(main())
