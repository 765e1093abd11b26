"""The code base is ruff-clean (rules in pyproject.toml)."""

import subprocess
import sys

from tests.conftest import REPO


def test_ruff_finds_nothing():
    result = subprocess.run([sys.executable, "-m", "ruff", "check", "scalebench", "provenance",
                             "benchmark_inference", "benchmark_training", "tests", "tools",
                             "containers"], cwd=REPO,
                            capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stdout[-3000:]
