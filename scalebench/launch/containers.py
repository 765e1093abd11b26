"""The container helper's command line: runs a command on the host or inside an image, with
the command line its runtime builds (scalebench.launch.runtimes) from the templates' SB_*
variables (scalebench.launch.launch_variables). ``scalebench run --runtime`` and the SLURM
templates (slurm_templates/task-python.sh calls ``exec`` / ``argv``) start it. Standard
library only: the launcher and the batch scripts run it with any host Python.

    python -m scalebench.launch.containers argv [OPTIONS] -- COMMAND...
        print the command line
    python -m scalebench.launch.containers exec [OPTIONS] -- COMMAND...
        run it (replaces itself)
    python -m scalebench.launch.containers identity [--runtime R --image I]
        the image's digest (docker, podman: then its labels as JSON)
    python -m scalebench.launch.containers run IMAGE [--engine podman] [--no-gpus]
        [--bind SRC:DST] -- COMMAND...
        docker/podman run, the image's identity handed in (scalebench.launch.images)
"""

from __future__ import annotations

import argparse
import os
import shlex
import subprocess
import sys
from pathlib import Path

from scalebench.errors import EXIT_BAD_INPUT, ScalebenchError, error_lines
from scalebench.launch.launch_variables import launch_from_environment, named_image
from scalebench.launch.runtimes import Launch, engine_runtime, get_runtime
from scalebench.repository import REPO


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
            reference = runtime.image_reference(named_image(env))
            found = runtime.identity(reference) if reference else None
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
