"""``python -m magnetar.cli``: the same as the ``magnetar`` console script."""

import sys

from . import main

sys.exit(main())
