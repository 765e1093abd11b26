"""The code base is ruff-clean (rules in pyproject.toml)."""

import subprocess
import sys

from tests.support.paths import REPO


def test_ruff_finds_nothing():
    # Every Python file of the repository (ruff leaves out .venv and what .gitignore lists),
    # as `make lint` checks them.
    result = subprocess.run([sys.executable, "-m", "ruff", "check"], cwd=REPO,
                            capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stdout[-3000:]
