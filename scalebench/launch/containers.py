"""Container runtimes: the one place where the command line that runs a command on the host
or inside an image is built.

One class per runtime (``none``: the host, ``apptainer``, ``docker``, ``podman``) turns a
:class:`Launch` (command, image, working folder, variables handed in, binds, GPUs) into an
argv. ``scalebench run --runtime``, ``python -m scalebench.launch.containers run`` and the SLURM
templates (slurm_templates/task-python.sh calls ``exec`` / ``argv`` below) all use it.

Inside a container, a rank sees only what is handed in: under srun, ``apptainer
--cleanenv`` drops every SLURM_* variable, so RANK / LOCAL_RANK / WORLD_SIZE /
LOCAL_WORLD_SIZE / MASTER_ADDR / MASTER_PORT and the ids provenance records are passed
explicitly. A Docker / podman container cannot read its own image, so its digest (the image
ID) and labels are handed in too and the image is started by that ID; a SIF's processes could
read their SIF, but its digest is taken once and handed in (each rank would hash gigabytes).
Standard library only: the launcher and the batch scripts run it with any host Python.

    python -m scalebench.launch.containers argv [OPTIONS] -- COMMAND...
        print the command line
    python -m scalebench.launch.containers exec [OPTIONS] -- COMMAND...
        run it (replaces itself)
    python -m scalebench.launch.containers identity [--runtime R --image I]
        the image's digest (docker, podman: then its labels as JSON)
    python -m scalebench.launch.containers run IMAGE [--engine podman] [--no-gpus]
        [--bind SRC:DST] -- COMMAND...
        docker/podman run, the image's identity handed in

Image identities: ``image_digest`` (what rows record: a SIF's digest, provenance/sif.py, or a
Docker/podman image ID, which a push or pull leaves unchanged) and ``verify_image`` (the
check ``scalebench verify-image`` makes before a replay; a repository digest the engine
knows is accepted too).

The options default to the templates' variables (slurm_templates/common.sh lists them):
SB_RUNTIME, SB_ENGINE (the engine command with global options, e.g. ``podman --root DIR``;
default: the runtime's name), SB_IMAGE, SB_IMAGE_DIGEST / SB_IMAGE_LABELS_JSON (docker,
podman: resolved with ``image inspect`` when unset; apptainer: the SIF's digest, handed in
when set), SB_REPO (bound, the working folder),
SB_PYTHON (the interpreter COMMAND is given to when it starts with an option; default
SB_REPO/.venv/bin/python on the host, ``python`` in images), SB_GPUS=1 (the GPUs
CUDA_VISIBLE_DEVICES names, else all), SB_BENCHMARK, SB_CONFIG (its folder), SB_OUTPUTS,
SB_DATA, SB_WEIGHTS (becomes TORCH_HOME), SCALEBENCH_CACHE (bound at their own paths unless
under another bind), SB_BINDS (more binds, comma-separated SRC:DST[:OPTIONS]) and
SB_TASK_RANKS=1 (inside an srun step: the ranks come from SLURM's task variables).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import subprocess
import sys
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar

from scalebench.benchmarks import REPO
from scalebench.errors import EXIT_BAD_INPUT, CommandFailed, ScalebenchError, error_lines
from scalebench.launch.rank_env import slurm_ranks

DIGEST = re.compile(r"^sha256:[0-9a-f]{64}$")
# Handed into containers when set: what the ranks, the pre-flight and provenance read.
PASSED_VARIABLES = (
    "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT",
    "SLURM_JOB_ID", "SLURM_STEP_ID", "SLURM_JOB_NODELIST", "SLURM_ARRAY_TASK_ID",
    "SLURM_RESTART_COUNT", "SLURM_NTASKS", "SLURM_NTASKS_PER_NODE", "SLURMD_NODENAME",
    "CUDA_VISIBLE_DEVICES", "SCALEBENCH_PREFLIGHT", "TORCH_HOME", "SCALEBENCH_CACHE",
    "SCALEBENCH_OFFLINE", "SCALEBENCH_COLLECTIVE_TIMEOUT_S", "SCALEBENCH_FAIL_RANK",
    "OMP_NUM_THREADS")
# Handed in too: NCCL's settings (interfaces, InfiniBand), which provenance records.
PASSED_PREFIXES = ("NCCL_",)
DIGEST_VARIABLE, LABELS_VARIABLE = "SCALEBENCH_IMAGE_DIGEST", "SCALEBENCH_IMAGE_LABELS_JSON"
# Folders bound at their own paths: the repository first, then these when set.
FOLDER_VARIABLES = ("SB_BENCHMARK", "SB_OUTPUTS", "SB_DATA", "SB_WEIGHTS", "SCALEBENCH_CACHE")


@dataclass(frozen=True)
class ImageIdentity:
    """What a container is told about its image: digest (a Docker/podman image ID, a SIF's
    digest) and labels (Docker/podman only)."""

    digest: str
    labels: dict[str, str] | None  # None: the image's processes read them (a SIF)

    def variables(self) -> dict[str, str]:
        if self.labels is None:
            return {DIGEST_VARIABLE: self.digest}
        labels = json.dumps(self.labels, sort_keys=True, separators=(",", ":"))
        return {DIGEST_VARIABLE: self.digest, LABELS_VARIABLE: labels}


@dataclass
class Launch:
    """One command to run, and what its container gets."""

    command: list[str]
    image: str = ""  # SIF file, or image reference (docker/podman start it by its ID)
    workdir: str | None = None  # working folder inside the container
    env: dict[str, str] = field(default_factory=dict)  # handed in explicitly, in this order
    binds: list[str] = field(default_factory=list)  # SRC:DST[:OPTIONS]
    gpus: bool = False
    devices: list[str] = field(default_factory=list)  # GPUs to expose; empty: all


class Runtime(ABC):
    """A container runtime (ReFrame's container platform): a Launch in, an argv out."""

    name: ClassVar[str]
    default_python: ClassVar[str] = "python"  # the image's interpreter

    def __init__(self, engine: Sequence[str] | None = None) -> None:
        self.engine = list(engine) if engine else [self.name]

    @abstractmethod
    def command_line(self, launch: Launch) -> list[str]:
        """The argv that runs ``launch.command``."""

    def identity(self, image: str) -> ImageIdentity | None:
        """What must be handed in for rows to record the image; None: nothing."""
        return None


class Host(Runtime):
    """No container: the command itself; variables reach it through the process environment
    and the host's GPUs are all visible (CUDA_VISIBLE_DEVICES selects)."""

    name = "none"
    default_python = ".venv/bin/python"  # under the repository

    def command_line(self, launch: Launch) -> list[str]:
        return list(launch.command)


class Apptainer(Runtime):
    """``apptainer exec --cleanenv``: the image's own environment plus what is handed in.

    A SIF's processes can read their image, but each would hash all of it (seconds per
    gigabyte, per rank): its digest is taken once and handed in as well."""

    name = "apptainer"

    def identity(self, image: str) -> ImageIdentity:
        from provenance.sif import SifError, sif_digest

        try:
            return ImageIdentity(sif_digest(image), None)
        except SifError as error:
            raise ScalebenchError(str(error)) from None

    def command_line(self, launch: Launch) -> list[str]:
        argv = [*self.engine, "exec", "--cleanenv"]
        if launch.workdir:
            argv += ["--pwd", launch.workdir]
        if launch.gpus:
            argv.append("--nv")  # every GPU's device; CUDA_VISIBLE_DEVICES (handed in) selects
        for name, value in launch.env.items():
            argv += ["--env", apptainer_env_item(name, value)]
        for bind in launch.binds:
            argv += ["--bind", bind]
        return [*argv, launch.image, *launch.command]


def apptainer_env_item(name: str, value: str) -> str:
    """One ``--env`` item that apptainer reads back as NAME=VALUE.

    Its parser takes an item with a single '=' whole (less any trailing double quote) and
    reads one with more as a comma-separated CSV record: such an item holding a comma, a
    quote or a line break is written as one quoted CSV field.
    """
    item = f"{name}={value}"
    if "=" not in value:
        if value.endswith('"'):
            raise ScalebenchError(f"apptainer --env cannot pass {name}: its value ends with "
                                  f"a double quote")
        return item
    if any(character in item for character in ',"\r\n'):
        return '"' + item.replace('"', '""') + '"'
    return item


class Docker(Runtime):
    """``docker run``: host network and IPC (collectives, shared memory), explicit variables.

    The engine exposes the GPUs; inside they are numbered from 0, so CUDA_VISIBLE_DEVICES
    is not handed in.
    """

    name = "docker"

    def command_line(self, launch: Launch) -> list[str]:
        argv = [*self.engine, "run", "--rm", "--network", "host", "--ipc", "host"]
        if launch.workdir:
            argv += ["--workdir", launch.workdir]
        if launch.gpus:
            argv += self.gpu_options(launch.devices)
        for name, value in launch.env.items():
            if name != "CUDA_VISIBLE_DEVICES":
                argv += ["--env", f"{name}={value}"]
        for bind in launch.binds:
            argv += ["--volume", bind]
        return [*argv, launch.image, *launch.command]

    def gpu_options(self, devices: list[str]) -> list[str]:
        # The NVIDIA container toolkit; a device list is one CSV field, hence the quotes.
        return ["--gpus", f'"device={",".join(devices)}"' if devices else "all"]

    def inspect(self, image: str, template: str) -> str:
        """``image inspect --format TEMPLATE`` of the engine."""
        result = subprocess.run([*self.engine, "image", "inspect", "--format", template, image],
                                capture_output=True, text=True, check=False)
        if result.returncode != 0:
            reason = (result.stderr.strip().splitlines() or ["no output"])[-1]
            raise ScalebenchError(f"cannot inspect image {image!r} with {self.engine[0]}: "
                                  f"{reason}")
        return result.stdout.strip()

    def image_id(self, image: str) -> str:
        identity = self.inspect(image, "{{.Id}}")
        return identity if identity.startswith("sha256:") else f"sha256:{identity}"

    def identity(self, image: str) -> ImageIdentity:
        digest = self.image_id(image)
        return ImageIdentity(digest, json.loads(self.inspect(digest, "{{json .Config.Labels}}"))
                             or {})


class Podman(Docker):
    """``podman run``: like docker, GPUs through CDI (podman has no ``--gpus`` before 5.0)."""

    name = "podman"

    def gpu_options(self, devices: list[str]) -> list[str]:
        options = []
        for device in devices or ["all"]:
            options += ["--device", f"nvidia.com/gpu={device}"]
        return options


RUNTIMES: dict[str, type[Runtime]] = {kind.name: kind for kind in (Host, Apptainer, Docker,
                                                                    Podman)}


def get_runtime(name: str, engine: Sequence[str] | str | None = None) -> Runtime:
    """The runtime called ``name``; ``engine`` is its command with global options."""
    if name not in RUNTIMES:
        raise ScalebenchError(f"SB_RUNTIME must be {', '.join(list(RUNTIMES)[:-1])} or "
                              f"{list(RUNTIMES)[-1]}, got {name!r}")
    return RUNTIMES[name](shlex.split(engine) if isinstance(engine, str) else engine)


def engine_runtime(engine: Sequence[str] | str) -> Docker:
    """Docker or Podman, from an engine command such as ``podman --root DIR``."""
    command = shlex.split(engine) if isinstance(engine, str) else list(engine)
    return (Podman if Path(command[0]).name == "podman" else Docker)(command)


class ImageMismatch(CommandFailed):
    """The image exists but its digest is not the expected one."""


def image_digest(image: str, engine: str | list[str] = "docker") -> str:
    """The digest rows record: of a SIF file (provenance.sif: the file's sha256 without its
    build stamps), or the image ID of an engine's image, as 'sha256:HEX'."""
    if image.endswith(".sif") or Path(image).is_file():
        if not Path(image).is_file():
            raise ScalebenchError(f"SIF file {image} does not exist")
        return Apptainer().identity(image).digest
    return engine_runtime(engine).image_id(image)


def _repo_digests(image: str, engine: str | list[str]) -> list[str]:
    listed = json.loads(engine_runtime(engine).inspect(image, "{{json .RepoDigests}}")) or []
    return [entry.split("@", 1)[1] for entry in listed if "@" in entry]


def verify_image(image: str, digest: str, engine: str | list[str] = "docker") -> str:
    """Return a one-line confirmation when ``image`` has ``digest``; raise otherwise.

    ScalebenchError for bad input (a malformed digest, an image that cannot be read),
    ImageMismatch when the image is there but is another one.
    """
    if not DIGEST.match(digest):
        raise ScalebenchError(f"--digest must be 'sha256:' and 64 lower-case hex digits, "
                              f"got {digest!r}")
    actual = image_digest(image, engine)
    if actual == digest:
        return f"{image}: digest {digest} verified"
    if not Path(image).is_file() and digest in _repo_digests(image, engine):
        return f"{image}: repository digest {digest} verified (image ID {actual})"
    raise ImageMismatch(f"{image} has digest {actual}, not {digest}: it is another image")


def run_argv(image: str, command: list[str], engine: str | list[str] = "docker",
             gpus: bool = True, binds: list[str] | None = None) -> list[str]:
    """The ``docker/podman run`` command line (``command_line``) that hands the image's
    identity in; the image is started by its ID, so the digest handed in is what runs."""
    runtime = engine_runtime(engine)
    identity = runtime.identity(image)
    volumes = []
    for bind in binds or []:
        if ":" not in bind:
            raise ScalebenchError(f"--bind must be SRC:DST, got {bind!r}")
        source, target = bind.split(":", 1)
        volumes.append(f"{Path(source).resolve()}:{target}")
    return runtime.command_line(Launch(command, identity.digest, env=identity.variables(),
                                       binds=volumes, gpus=gpus))


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
    python = env.get("SB_PYTHON") or (f"{repo}/{runtime.default_python}"
                                      if isinstance(runtime, Host) else runtime.default_python)
    names = [*PASSED_VARIABLES, *sorted(name for name in env if name.startswith(PASSED_PREFIXES))]
    handed = {name: env[name] for name in names if env.get(name)}
    launch = Launch(command=[python, *command], env=handed, workdir=repo,
                    gpus=env.get("SB_GPUS", "0") == "1",
                    devices=[d for d in env.get("CUDA_VISIBLE_DEVICES", "").split(",") if d])
    if isinstance(runtime, Host):
        return launch
    launch.image = image = required_image(env, runtime)
    if isinstance(runtime, Apptainer) and env.get("SB_IMAGE_DIGEST"):
        launch.env[DIGEST_VARIABLE] = env["SB_IMAGE_DIGEST"]  # taken once per job
    if isinstance(runtime, Docker):
        identity = handed_identity(env, runtime, image)
        launch.image = identity.digest  # what runs is what the rows record
        launch.env.update(identity.variables())
    launch.binds = folder_binds(env, repo) + [
        bind if ":" in bind else f"{bind}:{bind}"
        for bind in env.get("SB_BINDS", "").split(",") if bind]
    return launch


def required_image(env: Mapping[str, str], runtime: Runtime) -> str:
    image = env.get("SB_IMAGE") or ""
    if not image:
        what = "the SIF file" if isinstance(runtime, Apptainer) else "the image"
        raise ScalebenchError(f"SB_IMAGE must name {what} (SB_RUNTIME={runtime.name})")
    return image


def handed_identity(env: Mapping[str, str], runtime: Docker, image: str) -> ImageIdentity:
    """SB_IMAGE_DIGEST / SB_IMAGE_LABELS_JSON (the batch script resolves them once per job),
    else the engine's answer now."""
    digest = env.get("SB_IMAGE_DIGEST")
    if not digest:
        return runtime.identity(image)
    labels = env.get("SB_IMAGE_LABELS_JSON")
    try:
        parsed = json.loads(labels) if labels else runtime.identity(digest).labels
    except json.JSONDecodeError as error:
        raise ScalebenchError(f"SB_IMAGE_LABELS_JSON is not JSON: {error}") from None
    return ImageIdentity(digest, parsed)


def launcher_python(runtime: Runtime, image: str, folders: Mapping[str, Path | None]
                    ) -> tuple[list[str], dict[str, str]]:
    """What ``scalebench run --runtime`` starts its steps and ranks with: this helper as the
    ``--python`` command, and the variables it reads (``folders``: SB_CONFIG, SB_BENCHMARK,
    SB_OUTPUTS, each bound when set). Docker/podman images are resolved here, once."""
    variables = {"SB_RUNTIME": runtime.name, "SB_ENGINE": shlex.join(runtime.engine),
                 "SB_IMAGE": image, "SB_REPO": os.environ.get("SB_REPO") or str(REPO)}
    variables.update({name: str(path.resolve()) for name, path in folders.items() if path})
    identity = runtime.identity(image)  # the image named now, whatever an old SB_IMAGE_DIGEST says
    if identity is not None:
        variables["SB_IMAGE_DIGEST"] = identity.digest
        if identity.labels is not None:
            variables["SB_IMAGE_LABELS_JSON"] = identity.variables()[LABELS_VARIABLE]
    return [sys.executable, "-m", "scalebench.launch.containers", "exec", "--"], variables


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m scalebench.launch.containers",
                                     description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    for name, text in (("argv", "print the command line, shell-quoted"),
                       ("exec", "run the command line in place of this process"),
                       ("identity", "print the image's digest and labels (JSON), one a line")):
        sub = commands.add_parser(name, help=text)
        sub.add_argument("--runtime", help="none, apptainer, docker or podman (SB_RUNTIME)")
        sub.add_argument("--engine", help="engine command with global options (SB_ENGINE)")
        sub.add_argument("--image", help="SIF file or image (SB_IMAGE)")
    run = commands.add_parser("run", help="docker/podman run a command in an image, its "
                              "digest and labels handed in")
    run.add_argument("image")
    run.add_argument("--engine", default=os.environ.get("SCALEBENCH_ENGINE", "docker"),
                     help="docker or podman, with global options (default: docker)")
    run.add_argument("--no-gpus", action="store_true", help="do not request GPUs")
    run.add_argument("--bind", action="append", default=[], help="SRC:DST (repeatable)")
    return parser


def main(argv: list[str] | None = None) -> int:
    """Everything after '--' is the command (arguments of SB_PYTHON)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    split = argv.index("--") if "--" in argv else len(argv)
    args = _parser().parse_args(argv[:split])
    command = argv[split + 1:]
    if args.command == "run":
        try:
            line = run_argv(args.image, command, args.engine, not args.no_gpus, args.bind)
        except ScalebenchError as error:
            print(*error_lines(error), sep="\n", file=sys.stderr)
            return EXIT_BAD_INPUT
        return subprocess.run(line, check=False).returncode
    env = dict(os.environ)
    for variable, value in (("SB_RUNTIME", args.runtime), ("SB_ENGINE", args.engine),
                            ("SB_IMAGE", args.image)):
        if value is not None:
            env[variable] = value
    env.setdefault("SB_REPO", str(REPO))
    try:
        runtime = get_runtime(env.get("SB_RUNTIME") or "none", env.get("SB_ENGINE") or None)
        if args.command == "identity":
            found = runtime.identity(required_image(env, runtime)) \
                if not isinstance(runtime, Host) else None
            if found is None:
                raise ScalebenchError(f"identity is for images; {runtime.name} has none")
            print("\n".join(found.variables().values()))
            return 0
        launch = launch_from_environment(env, command, runtime)
    except ScalebenchError as error:
        print(*error_lines(error), sep="\n", file=sys.stderr)
        return EXIT_BAD_INPUT
    line = runtime.command_line(launch)
    if args.command == "argv":
        print(shlex.join(line))
        return 0
    sys.stdout.flush()
    try:
        os.execvpe(line[0], line, {**os.environ, **launch.env})
    except OSError as error:
        print(f"scalebench: error: cannot run {line[0]}: {error.strerror}", file=sys.stderr)
        return 127


if __name__ == "__main__":
    sys.exit(main())
