"""The container command lines run for real: host, podman and Apptainer start the command
with the rank variables handed in."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tarfile
import tempfile
from pathlib import Path

import pytest

from scalebench.launch.images import inspect_image
from scalebench.launch.launch_variables import launch_from_environment, launcher_python
from scalebench.launch.runtimes import Apptainer, Launch, engine_runtime
from tests.support.container_lines import APPTAINER_ENV, SLURM_TASK

# What the command in the container reports: variables handed in, the working folder, a file
# read through a bind.
PROBE = ('echo "RANK=$RANK NODES=$SLURM_JOB_NODELIST PWD=$(pwd) DIGEST=$SCALEBENCH_IMAGE_DIGEST"'
         '; echo "LABELS=$SCALEBENCH_IMAGE_LABELS_JSON"; read -r line < "$1"; echo "BOUND=$line"')


def shell_root(tarball: Path) -> Path:
    """A root file system holding the host's dash and its C library: enough to run PROBE."""
    libraries = subprocess.run(["ldd", "/bin/dash"], capture_output=True, text=True,
                               check=True).stdout.split()
    files = ["/bin/dash", *(word for word in libraries if word.startswith("/"))]
    with tarfile.open(tarball, "w") as archive:
        for path in files:
            archive.add(os.path.realpath(path), arcname=path.lstrip("/"))
        archive.add("/bin/dash", arcname="bin/sh")
    return tarball


@pytest.fixture(params=["podman", "docker"])
def engine(request, monkeypatch):
    """An engine command that works here: the tests' podman (private storage), or docker where
    a daemon runs."""
    if request.param == "podman":
        from tests.support.container_tools import Podman as PrivatePodman
        from tests.support.container_tools import ensure_tools

        ensure_tools()
        # podman refuses a run root path longer than 50 characters: not under tmp_path.
        podman = PrivatePodman(Path(tempfile.mkdtemp(prefix="scalebench-podman-")))
        monkeypatch.setenv("CONTAINERS_CONF", str(podman.conf))
        yield podman.command
        podman.remove_everything()
        return
    name = request.param
    if shutil.which(name) is None or subprocess.run([name, "info"], capture_output=True,
                                                    check=False).returncode != 0:
        pytest.skip(f"{name} is not installed or its daemon is not running here (the tests "
                    "provide podman and apptainer)")
    yield [name]


def test_real_run_of_the_command_line(engine, tmp_path, monkeypatch):
    runtime = engine_runtime(engine)
    tag = f"localhost/scalebench-shell-{os.getpid()}:test"
    imported = subprocess.run([*engine, "import", "--change", "LABEL org.scalebench.test=yes",
                               str(shell_root(tmp_path / "root.tar")), tag],
                              capture_output=True, text=True, check=False)
    assert imported.returncode == 0, imported.stderr
    data = tmp_path / "data"
    data.mkdir()
    (data / "file.txt").write_text("through the bind\n")
    env = {**SLURM_TASK, "SB_REPO": str(tmp_path), "SB_IMAGE": tag, "SB_DATA": str(data),
           "SB_PYTHON": "/bin/sh"}
    try:
        image_id = inspect_image(runtime.engine, tag, "{{.Id}}")
        launch = launch_from_environment(env, ["-c", PROBE, "sh", str(data / "file.txt")],
                                         runtime)
        done = subprocess.run(runtime.command_line(launch), capture_output=True, text=True,
                              timeout=120, check=False)
        # `scalebench run --runtime R --image TAG` resolves TAG, whatever an exported
        # SB_IMAGE_DIGEST of an earlier job says
        monkeypatch.setenv("SB_IMAGE_DIGEST", "sha256:" + "0" * 64)
        handed = launcher_python(runtime, tag, {})[1]
    finally:
        subprocess.run([*engine, "rmi", "--force", tag], capture_output=True, check=False)
    assert handed["SB_IMAGE_DIGEST"] == f"sha256:{image_id.removeprefix('sha256:')}"
    assert done.returncode == 0, done.stderr
    assert launch.image == f"sha256:{image_id.removeprefix('sha256:')}"
    lines = done.stdout.splitlines()
    assert lines[0] == f"RANK=3 NODES=n[1,3] PWD={tmp_path} DIGEST={launch.image}"
    assert json.loads(lines[1].removeprefix("LABELS=")) == {"org.scalebench.test": "yes"}
    assert lines[2] == "BOUND=through the bind"


def test_real_run_in_apptainer(apptainer_on_path, tmp_path, monkeypatch):
    """apptainer exec as Apptainer writes it: --cleanenv keeps only what is handed in, every
    --env item arrives as it was (APPTAINER_ENV's encodings), binds and --pwd apply."""
    root = tmp_path / "root"
    with tarfile.open(shell_root(tmp_path / "root.tar")) as archive:
        archive.extractall(root, filter="tar")
    sif = tmp_path / "shell.sif"
    built = subprocess.run(["apptainer", "build", str(sif), str(root)], capture_output=True,
                           text=True, timeout=300, check=False)
    assert built.returncode == 0, built.stderr[-2000:]
    data = tmp_path / "data"
    data.mkdir()
    (data / "file.txt").write_text("through the bind\n")
    values = {f"V{number}": value for number, value in enumerate(APPTAINER_ENV)}
    report = "; ".join(f'printf "%s\\n" "${name}"' for name in values)
    probe = f'{report}; echo "JOB=$SLURM_JOB_ID PWD=$(pwd)"; read -r line < /in/file.txt; ' \
            'echo "BOUND=$line"'
    monkeypatch.setenv("SLURM_JOB_ID", "7")  # not handed in: --cleanenv drops it
    launch = Launch(["/bin/sh", "-c", probe], str(sif), workdir="/", env=values,
                    binds=[f"{data}:/in:ro"])
    done = subprocess.run(Apptainer().command_line(launch), capture_output=True, text=True,
                          timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [*values.values(), "JOB= PWD=/",
                                        "BOUND=through the bind"]
