"""``python -m toolmatrix.cli``: the ``toolmatrix`` command (its old path, when it was one module)."""

import sys

from toolmatrix.cli import main

sys.exit(main())
