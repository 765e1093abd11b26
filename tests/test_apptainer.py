"""The Apptainer half of the bundle, for real: scalebench.sif built from
containers/scalebench.def (only the bootstrap lines name the stand-in base's archive) and run
the way users run it. The SIF is built once per session (conftest's `scalebench_sif`), with
Debian sid's apptainer from tests/apptainer_tools.py where none is installed.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
import yaml
from dockerfile_parse import DockerfileParser

from containers.generate import read_lock
from tests.conftest import REPO, tiny_experiment

pytestmark = pytest.mark.slow
LOCK = read_lock((REPO / "constraints.txt").read_text())
SRC = "/opt/scalebench/src"


def apptainer(*args: str, timeout: int = 900) -> subprocess.CompletedProcess:
    return subprocess.run(["apptainer", *args], capture_output=True, text=True,
                          timeout=timeout, check=False)


def host(*args: str, timeout: int = 600) -> subprocess.CompletedProcess:
    """python -m scalebench ARGS in the host's venv."""
    return subprocess.run([sys.executable, "-m", "scalebench", *args], cwd=REPO,
                          capture_output=True, text=True, timeout=timeout, check=False)


def output(result: subprocess.CompletedProcess) -> str:
    return result.stdout[-3000:] + result.stderr[-3000:]


def sif_labels(sif: Path) -> dict[str, str]:
    shown = apptainer("inspect", "--json", "--labels", str(sif))
    assert shown.returncode == 0, shown.stderr
    return json.loads(shown.stdout)["data"]["attributes"]["labels"]


def test_sif_carries_the_docker_labels_and_build_info(scalebench_sif):
    from provenance.environment import code_state
    from scalebench.images import build_arguments

    labels = sif_labels(scalebench_sif.path)
    arguments = build_arguments(scalebench_sif.base.reference)
    docker = {key: re.sub(r"\$\{(\w+)\}", lambda m: arguments[m.group(1)], value)
              for key, value in DockerfileParser(str(REPO / "containers/Dockerfile")).labels
              .items()}
    assert {key: labels.get(key) for key in docker} == docker
    assert labels["org.scalebench.torch"] == LOCK["torch"]
    assert labels["org.opencontainers.image.base.digest"] == \
        scalebench_sif.base.reference.split("@")[1]
    # Chosen compression, recorded; the build date is the inputs', not the build's clock.
    assert labels["org.scalebench.squashfs-compression"] == "zstd:3"
    assert labels["org.label-schema.build-date"] == arguments["CREATED"]
    info = apptainer("exec", str(scalebench_sif.path), "cat", "/opt/scalebench/build-info.json")
    assert info.returncode == 0, info.stderr
    state = code_state(REPO)
    assert json.loads(info.stdout) == {
        "commit": state["code_commit"], "dirty": state["code_dirty"],
        "diff_sha256": state["code_diff_sha256"], "build_date": arguments["CREATED"]}
