"""The old path of ``toolmatrix.testing.fake``, kept because engine stand-in scripts and users name it:
``python -m toolmatrix.fake`` runs the fake server, and ``import toolmatrix.fake`` gives that same module."""

import sys

from toolmatrix.testing import fake

if __name__ == "__main__":
    fake.main(prog="python -m toolmatrix.fake")  # --help names the command as it was typed
else:
    sys.modules[__name__] = fake
