"""docs/comparing.md's command blocks, run for real in a clone of the repository (the
integration test runs the core-count and commit blocks, the image test the podman block)."""

from __future__ import annotations

import os
import re
import stat
import subprocess
import sys
from pathlib import Path

from tests.support.paths import REPO

PAGE = REPO / "docs" / "comparing.md"
OUTPUTS = Path("benchmark_inference") / "outputs"  # where the page's commands write
BLOCK = re.compile(r"<!-- commands: (?P<name>[\w-]+) -->\n```sh\n(?P<body>.*?)```", re.S)
# Where the page's podman block runs: the image it needs is built there.
PODMAN_BLOCK_TEST = "tests/system/test_containers.py::test_compare_names_what_the_image_changes"


def page_blocks() -> dict[str, list[str]]:
    return {m.group("name"): m.group("body").strip().splitlines()
            for m in BLOCK.finditer(PAGE.read_text())}


def clone(folder: Path) -> Path:
    """The repository's committed state, plus the working tree's tracked changes (so the page
    runs the code under test), committed, with an empty commit on top: ``HEAD~1`` is the same
    code under another commit."""
    copy = folder / "repository"
    git = ["git", "-c", "user.name=test", "-c", "user.email=test@example.com"]
    subprocess.run([*git, "clone", "--quiet", str(REPO), str(copy)], check=True)
    diff = subprocess.run(["git", "diff", "HEAD"], cwd=REPO, capture_output=True, check=True)
    if diff.stdout:
        subprocess.run(["git", "apply"], cwd=copy, input=diff.stdout, check=True)
    for message in ("the working tree under test", "the commit compared with the one before"):
        subprocess.run([*git, "commit", "--quiet", "--allow-empty", "-am", message], cwd=copy,
                       check=True)
    return copy


def shell(copy: Path) -> dict[str, str]:
    """An environment whose ``scalebench`` is this interpreter running the clone's code, with
    torch's default thread count (the page compares it with one thread)."""
    bin_folder = copy.parent / "bin"
    bin_folder.mkdir(exist_ok=True)
    command = bin_folder / "scalebench"
    command.write_text(f'#!/bin/sh\nexec {sys.executable} -m scalebench "$@"\n')
    command.chmod(command.stat().st_mode | stat.S_IXUSR)
    return {**default_threads_env(), "PATH": f"{bin_folder}:{os.environ['PATH']}",
            "PYTHONPATH": str(copy)}


def default_threads_env() -> dict[str, str]:
    """This process's environment without OMP_NUM_THREADS, which the test workers set for
    the processes they start: torch's default thread count, as a user's shell has it."""
    return {name: value for name, value in os.environ.items() if name != "OMP_NUM_THREADS"}


def run_block(name: str, copy: Path, env: dict[str, str], replace: dict[str, str] | None = None
              ) -> list[subprocess.CompletedProcess]:
    """The block's lines one by one in ``copy`` (each text of ``replace`` replaced first);
    `compare` may exit 1 (a regression is an answer)."""
    done = []
    for line in page_blocks()[name]:
        for old, new in (replace or {}).items():
            line = line.replace(old, new)
        done.append(subprocess.run(["bash", "-c", line], cwd=copy, env=env, capture_output=True,
                                   text=True, timeout=900, check=False))
        allowed = (0, 1) if " compare " in f" {line} " else (0,)
        assert done[-1].returncode in allowed, f"{line}\n{done[-1].stderr[-3000:]}"
    return done
