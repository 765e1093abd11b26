"""The templates' SB_* variables, read into a :class:`~scalebench.launch.runtimes.Launch`,
and the variables ``scalebench run --runtime`` sets for its steps and ranks.

Inside a container, a rank sees only what is handed in: under srun, ``apptainer
--cleanenv`` drops every SLURM_* variable, so RANK / LOCAL_RANK / WORLD_SIZE /
LOCAL_WORLD_SIZE / MASTER_ADDR / MASTER_PORT and the ids provenance records are passed
explicitly (PASSED_VARIABLES).

The variables (slurm_templates/common.sh lists them): SB_RUNTIME, SB_ENGINE (the engine
command with global options, e.g. ``podman --root DIR``; default: the runtime's name),
SB_IMAGE, SB_IMAGE_DIGEST / SB_IMAGE_LABELS_JSON (docker, podman: resolved with ``image
inspect`` when unset; apptainer: the SIF's digest, handed in when set), SB_REPO (bound, the
working folder), SB_PYTHON (the interpreter COMMAND is given to when it starts with an
option; default SB_REPO/.venv/bin/python on the host, ``python`` in images), SB_GPUS=1 (the
GPUs CUDA_VISIBLE_DEVICES names, else all), SB_BENCHMARK, SB_CONFIG (its folder),
SB_OUTPUTS, SB_DATA, SB_WEIGHTS (becomes TORCH_HOME), SCALEBENCH_CACHE (bound at their own
paths unless under another bind), SB_BINDS (more binds, comma-separated SRC:DST[:OPTIONS])
and SB_TASK_RANKS=1 (inside an srun step: the ranks come from SLURM's task variables).
SCALEBENCH_COLLECTIVE_TIMEOUT_S (the ranks' collective timeout: the launcher sets it per
experiment from its predicted phases, ``liveness``; default 600 s) and
SCALEBENCH_HEARTBEAT_TIMEOUT_S (the heartbeat silence that makes a rank hung, default 60 s;
tests lower it; the ranks beat twelve times within it) are passed in like the rank variables.
Standard library only.
"""

from __future__ import annotations

import os
import shlex
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

from scalebench.errors import ScalebenchError
from scalebench.launch.images import LABELS_VARIABLE, NamedImage
from scalebench.launch.rank_env import slurm_ranks
from scalebench.launch.runtimes import Launch, Runtime
from scalebench.repository import REPO

# Handed into containers when set: what the ranks, the pre-flight and provenance read.
PASSED_VARIABLES = (
    "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT",
    "SLURM_JOB_ID", "SLURM_STEP_ID", "SLURM_JOB_NODELIST", "SLURM_ARRAY_TASK_ID",
    "SLURM_RESTART_COUNT", "SLURM_NTASKS", "SLURM_NTASKS_PER_NODE", "SLURMD_NODENAME",
    "CUDA_VISIBLE_DEVICES", "SCALEBENCH_PREFLIGHT", "TORCH_HOME", "SCALEBENCH_CACHE",
    "SCALEBENCH_OFFLINE", "SCALEBENCH_COLLECTIVE_TIMEOUT_S", "SCALEBENCH_FAIL_RANK",
    "SCALEBENCH_HEARTBEAT_TIMEOUT_S", "OMP_NUM_THREADS")
# Handed in too: NCCL's settings (interfaces, InfiniBand), which provenance records.
PASSED_PREFIXES = ("NCCL_",)
# Folders bound at their own paths: the repository first, then these when set.
FOLDER_VARIABLES = ("SB_BENCHMARK", "SB_OUTPUTS", "SB_DATA", "SB_WEIGHTS", "SCALEBENCH_CACHE")


def named_image(env: Mapping[str, str]) -> NamedImage:
    """The image SB_IMAGE names, with the identity SB_IMAGE_DIGEST / SB_IMAGE_LABELS_JSON
    give it."""
    return NamedImage(env.get("SB_IMAGE") or "", env.get("SB_IMAGE_DIGEST") or "",
                      env.get("SB_IMAGE_LABELS_JSON") or "")


def folder_binds(env: Mapping[str, str], repo: str) -> list[str]:
    """The repository, the folders FOLDER_VARIABLES name and SB_CONFIG's folder, at their own
    paths, each once and none under another."""
    config = env.get("SB_CONFIG")
    named = [repo, *(env.get(name, "") for name in FOLDER_VARIABLES),
             str(Path(config).parent) if config else ""]
    folders = list(dict.fromkeys(folder.rstrip("/") or "/" for folder in named if folder))

    def inside(folder: str, other: str) -> bool:
        return folder != other and folder.startswith(other.rstrip("/") + "/")

    return [f"{folder}:{folder}" for folder in folders
            if not any(inside(folder, other) for other in folders)]


def launch_from_environment(env: Mapping[str, str], command: Sequence[str],
                            runtime: Runtime) -> Launch:
    """The Launch the templates' variables describe (see the module's docstring)."""
    repo = env.get("SB_REPO") or ""
    if not repo:
        raise ScalebenchError("SB_REPO must name the repository folder")
    env = dict(env)
    if env.get("SB_TASK_RANKS") == "1":
        env.update(slurm_ranks(env))
    if env.get("SB_WEIGHTS"):
        env["TORCH_HOME"] = env["SB_WEIGHTS"]
    python = env.get("SB_PYTHON") or runtime.interpreter(repo)
    names = [*PASSED_VARIABLES, *sorted(name for name in env if name.startswith(PASSED_PREFIXES))]
    handed = {name: env[name] for name in names if env.get(name)}
    launch = Launch(command=[python, *command], env=handed, workdir=repo,
                    gpus=env.get("SB_GPUS", "0") == "1",
                    devices=[d for d in env.get("CUDA_VISIBLE_DEVICES", "").split(",") if d])
    binds = folder_binds(env, repo) + [
        bind if ":" in bind else f"{bind}:{bind}"
        for bind in env.get("SB_BINDS", "").split(",") if bind]
    return runtime.contain(launch, named_image(env), binds)


def launcher_python(runtime: Runtime, image: str, folders: Mapping[str, Path | None]
                    ) -> tuple[list[str], dict[str, str]]:
    """What ``scalebench run --runtime`` starts its steps and ranks with: the container
    helper as the ``--python`` command, and the variables it reads (``folders``: SB_CONFIG,
    SB_BENCHMARK, SB_OUTPUTS, each bound when set). Docker/podman images are resolved here,
    once."""
    variables = {"SB_RUNTIME": runtime.name, "SB_ENGINE": shlex.join(runtime.engine),
                 "SB_IMAGE": image, "SB_REPO": os.environ.get("SB_REPO") or str(REPO)}
    variables.update({name: str(path.resolve()) for name, path in folders.items() if path})
    identity = runtime.identity(image)  # the image named now, whatever an old SB_IMAGE_DIGEST says
    if identity is not None:
        variables["SB_IMAGE_DIGEST"] = identity.digest
        if identity.labels is not None:
            variables["SB_IMAGE_LABELS_JSON"] = identity.variables()[LABELS_VARIABLE]
    return [sys.executable, "-m", "scalebench.launch.containers", "exec", "--"], variables
