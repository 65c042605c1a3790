"""The stand-in servers moved to ``toolmatrix.testing``; the old paths users and stand-in scripts name still work."""

from __future__ import annotations

import subprocess
import sys

import toolmatrix.fake
import toolmatrix.hostile
from toolmatrix.testing import fake, hostile


def test_old_import_paths_are_the_moved_modules():
    assert toolmatrix.fake is fake and toolmatrix.hostile is hostile
    from toolmatrix.fake import FakeServer

    assert FakeServer is fake.FakeServer


def test_python_m_toolmatrix_fake_still_serves():
    process = subprocess.Popen([sys.executable, "-m", "toolmatrix.fake", "--port", "0"], stderr=subprocess.PIPE,
                               text=True)
    try:
        line = process.stderr.readline()
        assert line.startswith("fake engine listening at http://"), line
    finally:
        process.kill()
        process.wait()


def test_python_m_toolmatrix_hostile_still_runs():
    done = subprocess.run([sys.executable, "-m", "toolmatrix.hostile", "--help"], capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0, done.stderr
    assert all(mode in done.stdout for mode in hostile.MODES)
