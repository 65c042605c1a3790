"""The old path of ``toolmatrix.testing.hostile``, kept because users name it: ``python -m toolmatrix.hostile MODE``
runs the hostile server, and ``import toolmatrix.hostile`` gives that same module."""

import sys

from toolmatrix.testing import hostile

if __name__ == "__main__":
    hostile.main(prog="python -m toolmatrix.hostile")  # --help names the command as it was typed
else:
    sys.modules[__name__] = hostile
