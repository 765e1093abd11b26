"""The evaluation-cost tool run for real: a row per size and where it stopped."""


import subprocess
import sys

from tests.support.paths import REPO


def test_evaluation_cost_prints_a_row_per_size_and_where_it_stopped():
    done = subprocess.run([sys.executable, str(REPO / "tools" / "evaluation_cost.py"),
                           "--sizes", "64,65536", "--repeats", "1", "--device", "cpu"],
                          capture_output=True, text=True, check=False, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    lines = done.stdout.splitlines()
    row = next(line.split() for line in lines if line.split()[:1] == ["64"])
    assert len(row) == 7 and float(row[3]) > 0 and float(row[2]) > 0  # iteration, evaluation
    assert any(line.startswith(" 65536 skipped: needs about") for line in lines)
