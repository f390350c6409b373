"""``python -m magnetar.testing`` is the same as ``python -m magnetar.testing.standalone``."""

import sys

from .standalone import main

sys.exit(main())
