"""The container helper's command line (python -m scalebench.launch.containers): bad
variables are one-line errors."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from scalebench.errors import ScalebenchError
from scalebench.launch.runtimes import get_runtime
from tests.support.paths import REPO


@pytest.mark.parametrize(("env", "message"), [
    ({"SB_REPO": "/repo", "SB_RUNTIME": "lxc"},
     "SB_RUNTIME must be none, apptainer, docker or podman, got 'lxc'"),
    ({"SB_REPO": "/repo", "SB_RUNTIME": "apptainer"},
     "SB_IMAGE must name the SIF file (SB_RUNTIME=apptainer)"),
    ({"SB_REPO": "/repo", "SB_RUNTIME": "docker", "SB_IMAGE": "x", "SB_IMAGE_DIGEST": "sha256:a",
      "SB_IMAGE_LABELS_JSON": "{"},
     "SB_IMAGE_LABELS_JSON is not JSON: Expecting property name enclosed in double quotes: "
     "line 1 column 2 (char 1)"),
])
def test_bad_variables_are_one_line_errors(env, message):
    done = subprocess.run([sys.executable, "-m", "scalebench.launch.containers", "argv", "--",
                           "-V"],
                          env={"PATH": os.environ["PATH"], **env}, cwd=REPO,
                          capture_output=True, text=True, check=False)
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr == f"scalebench: error: {message}\n"
    with pytest.raises(ScalebenchError, match="must"):
        get_runtime("lxc")
