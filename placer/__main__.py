"""``python -m placer``: same as the ``placer`` console script."""

import sys

from placer.cli import main

sys.exit(main())
