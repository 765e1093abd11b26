"""A benchopt run of the cone-beam dataset without the Walnut scan names the command that
fetches it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.support.paths import BENCHMARK


def test_benchopt_run_without_the_walnut_names_the_fetch_command(tmp_path):
    """Plain `benchopt run` skips the data set as "not installed" after saying how to fetch."""
    done = subprocess.run(
        [str(Path(sys.executable).with_name("benchopt")), "run", str(BENCHMARK), "-d",
         "walnut_conebeam", "-s", "pnp[max_iter=1]", "-n", "1", "--no-plot"],
        cwd=tmp_path, env={**os.environ, "SCALEBENCH_CACHE": str(tmp_path)},
        capture_output=True, text=True, timeout=300, check=False)
    output = done.stdout + done.stderr
    assert f"walnut_conebeam: the walnut data set is not in the cache {tmp_path}: run " \
           f"`scalebench fetch --data walnut`" in output
    assert "not installed" in output
