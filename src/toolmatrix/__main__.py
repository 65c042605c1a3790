"""``python -m toolmatrix``: the ``toolmatrix`` command."""

import sys

from toolmatrix.cli import main

sys.exit(main())
