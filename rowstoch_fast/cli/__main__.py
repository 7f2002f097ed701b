"""``python -m rowstoch_fast.cli``: the ``rowstoch`` command."""

import sys

from . import main

sys.exit(main())
