"""Container images of scalebench: build them, launch them with their identity, verify them.

- ``build``: stage the sources (the files git tracks or would track) with a weights folder,
  fill the build arguments from git (commit, dirty flag, diff hash, SOURCE_DATE_EPOCH) and run
  ``docker``/``podman build`` on containers/Dockerfile, or ``apptainer build`` on
  containers/scalebench.def.
- ``run``: ``docker``/``podman run`` an image with its digest and labels handed in
  (SCALEBENCH_IMAGE_DIGEST, SCALEBENCH_IMAGE_LABELS_JSON), so that every result row records
  the image it came from; the command line comes from scalebench.runtimes, as for the
  launcher and the SLURM templates. Apptainer needs no helper: provenance hashes the SIF.
- ``verify``: check that an image (a SIF file or an engine's image) has a given digest, before
  a replay.

The digest of a Docker/podman image is its image ID (the sha256 of its configuration), which
a push or pull leaves unchanged, unlike the manifest digest that depends on how the registry
compresses layers; ``verify`` also accepts a repository digest the engine knows. The digest of
a SIF is the sha256 of the file with its build stamps (header ID and times) zeroed, which a
rebuild reproduces (provenance/sif.py). Only the standard library is used, so that this module runs
from a checkout with any Python that pyproject.toml allows.

    python -m scalebench.images verify IMAGE --digest sha256:HEX [--engine docker]
    python -m scalebench.images run IMAGE [--engine podman] [--no-gpus] [--bind SRC:DST] -- CMD
    python -m scalebench.images build [--engine podman] [--tag NAME] [--base REF] [--weights DIR]
        [-- BUILDER OPTIONS]
    python -m scalebench.images build-sif OUT.sif [--base REF] [--weights DIR] [-- OPTIONS]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import tomllib
from datetime import UTC, datetime
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

from scalebench.errors import ScalebenchError
from scalebench.runtimes import Apptainer, Launch, engine_runtime

ROOT = Path(__file__).resolve().parent.parent
DIGEST = re.compile(r"^sha256:[0-9a-f]{64}$")
EXIT_OK, EXIT_MISMATCH, EXIT_BAD_INPUT = 0, 1, 2


class ImageMismatch(ScalebenchError):
    """The image exists but its digest is not the expected one."""


def _engine(engine: str | list[str]) -> list[str]:
    return shlex.split(engine) if isinstance(engine, str) else list(engine)


def image_digest(image: str, engine: str | list[str] = "docker") -> str:
    """The digest rows record: of a SIF file (provenance.sif: the file's sha256 without its
    build stamps), or the image ID of an engine's image, as 'sha256:HEX'."""
    if image.endswith(".sif") or Path(image).is_file():
        if not Path(image).is_file():
            raise ScalebenchError(f"SIF file {image} does not exist")
        return Apptainer().identity(image).digest
    return engine_runtime(_engine(engine)).image_id(image)


def _repo_digests(image: str, engine: list[str]) -> list[str]:
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
    if not Path(image).is_file() and digest in _repo_digests(image, _engine(engine)):
        return f"{image}: repository digest {digest} verified (image ID {actual})"
    raise ImageMismatch(f"{image} has digest {actual}, not {digest}: it is another image")


def run_argv(image: str, command: list[str], engine: str | list[str] = "docker",
             gpus: bool = True, binds: list[str] | None = None) -> list[str]:
    """The ``docker/podman run`` command line (scalebench.runtimes) that hands the image's
    identity in; the image is started by its ID, so the digest handed in is what runs."""
    runtime = engine_runtime(_engine(engine))
    identity = runtime.identity(image)
    volumes = []
    for bind in binds or []:
        if ":" not in bind:
            raise ScalebenchError(f"--bind must be SRC:DST, got {bind!r}")
        source, target = bind.split(":", 1)
        volumes.append(f"{Path(source).resolve()}:{target}")
    return runtime.command_line(Launch(command, identity.digest, env=identity.variables(),
                                       binds=volumes, gpus=gpus))


def _git(*args: str) -> str:
    return subprocess.run(["git", "-C", str(ROOT), *args], capture_output=True, text=True,
                          check=True).stdout.strip()


def _source_url() -> str:
    """The origin remote without any credentials, or 'unknown'."""
    try:
        url = _git("remote", "get-url", "origin")
    except subprocess.CalledProcessError:
        return "unknown"
    parts = urlsplit(url)
    if parts.scheme and parts.hostname:
        netloc = parts.hostname + (f":{parts.port}" if parts.port else "")
        return urlunsplit((parts.scheme, netloc, parts.path, "", ""))
    return url.split("@", 1)[-1] if "@" in url else url


def build_arguments(base: str | None) -> dict[str, str]:
    """Build arguments of both definitions: code state from git, base from base-image.toml."""
    from provenance.environment import code_state

    if base is None:
        recorded = tomllib.loads((ROOT / "containers/base-image.toml").read_text())["base"]
        if not recorded["digest"]:
            raise ScalebenchError(
                f"containers/base-image.toml records no digest for {recorded['name']}:"
                f"{recorded['tag']}; record it there (see the comment) or pass "
                f"--base NAME@sha256:HEX")
        base = f"{recorded['name']}:{recorded['tag']}@{recorded['digest']}"
    name, _, digest = base.partition("@")
    if not DIGEST.match(digest):
        raise ScalebenchError(f"--base must be NAME@sha256:HEX (pinned by digest), got {base!r}")
    state = code_state(ROOT)
    epoch = os.environ.get("SOURCE_DATE_EPOCH") or _git("log", "-1", "--format=%ct")
    return {"BASE_NAME": name, "BASE_DIGEST": digest, "SOURCE_DATE_EPOCH": epoch,
            "CREATED": datetime.fromtimestamp(int(epoch), UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "SOURCE_URL": _source_url(), "SCALEBENCH_COMMIT": state["code_commit"],
            "SCALEBENCH_DIRTY": str(state["code_dirty"]).lower(),
            "SCALEBENCH_DIFF_SHA256": state["code_diff_sha256"]}


def stage_context(folder: Path, weights: Path) -> Path:
    """Copy the files git tracks or would track (what provenance hashes) and the weights."""
    if not (weights / "manifest.txt").is_file():
        raise ScalebenchError(f"weights folder {weights} has no manifest.txt")
    listed = _git("ls-files", "-z", "--cached", "--others", "--exclude-standard")
    for name in sorted(filter(None, listed.split("\0"))):
        source = ROOT / name
        if source.is_file():
            (folder / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, folder / name)
    shutil.copytree(weights, folder / ".build-weights")
    return folder


def build(engine: str | list[str], tag: str, base: str | None, weights: Path,
          extra: list[str]) -> str:
    """Build the Docker/podman image; return its digest (image ID)."""
    engine = _engine(engine)
    arguments = build_arguments(base)
    with tempfile.TemporaryDirectory(prefix="scalebench-context-") as folder:
        context = stage_context(Path(folder), weights.resolve())
        argv = [*engine, "build", "-f", str(context / "containers/Dockerfile"), "-t", tag,
                "--build-arg", "WEIGHTS=.build-weights"]
        argv += [f"--build-arg={key}={value}" for key, value in arguments.items()]
        if Path(engine[0]).name == "podman":
            # Layer files and history get this time instead of the clock's.
            argv += ["--timestamp", arguments["SOURCE_DATE_EPOCH"]]
        subprocess.run([*argv, *extra, str(context)], check=True)
    return image_digest(tag, engine)


BOOTSTRAP = "Bootstrap: docker\nFrom: {{ BASE_NAME }}@{{ BASE_DIGEST }}\n"
SQUASHFS_LABEL = "org.scalebench.squashfs-compression"  # COMPRESSOR:LEVEL


def definition_labels(text: str) -> dict[str, str]:
    """The %labels of an Apptainer definition, as written (build arguments unfilled)."""
    body = text.split("\n%labels\n", 1)[1].split("\n%", 1)[0]
    pairs = (line.strip().split(" ", 1) for line in body.splitlines() if line.strip())
    return {pair[0]: pair[1] if len(pair) > 1 else "" for pair in pairs}


def mksquashfs_arguments(definition: str) -> str:
    """mksquashfs options of the compression the definition's label records."""
    compressor, _, level = definition_labels(definition)[SQUASHFS_LABEL].partition(":")
    return f"-comp {compressor} -Xcompression-level {level}"


def local_bootstrap(definition: str, archive: Path) -> str:
    """The definition with its base taken from a docker-archive file instead of a registry
    (the base's name and digest are still recorded from the build arguments)."""
    if BOOTSTRAP not in definition:
        raise ScalebenchError("containers/scalebench.def has no 'Bootstrap: docker' / 'From: "
                              "{{ BASE_NAME }}@{{ BASE_DIGEST }}' lines to replace")
    return definition.replace(BOOTSTRAP, f"Bootstrap: docker-archive\nFrom: {archive}\n", 1)


def build_sif(output: Path, base: str | None, weights: Path, extra: list[str],
              base_archive: Path | None = None) -> str:
    """Build the SIF with apptainer; return its digest (provenance.sif.sif_digest).

    ``base_archive``: a docker-archive of ``base`` (a machine without registry access); the
    definition's bootstrap lines then name the file, every other line is the committed one.
    """
    if shutil.which("apptainer") is None:
        raise ScalebenchError("apptainer is not installed (https://apptainer.org/docs)")
    if base_archive is not None and not base_archive.is_file():
        raise ScalebenchError(f"base archive {base_archive} does not exist")
    if output.is_dir() or not output.resolve().parent.is_dir():
        raise ScalebenchError(f"cannot write the SIF to {output}: not a file in an existing "
                              f"folder")
    arguments = build_arguments(base)
    with tempfile.TemporaryDirectory(prefix="scalebench-context-") as folder:
        context = stage_context(Path(folder), weights.resolve())
        definition = context / "containers/scalebench.def"
        text = definition.read_text()
        if base_archive is not None:
            definition.write_text(local_bootstrap(text, base_archive.resolve()))
        argv = ["apptainer", "build", "--force", "--build-arg", "WEIGHTS=.build-weights",
                "--mksquashfs-args", mksquashfs_arguments(text)]
        argv += [f"--build-arg={key}={value}" for key, value in arguments.items()]
        # mksquashfs (and Apptainer releases with reproducible builds) take their times
        # from this variable.
        env = {**os.environ, "SOURCE_DATE_EPOCH": arguments["SOURCE_DATE_EPOCH"]}
        subprocess.run([*argv, *extra, str(output.resolve()), "containers/scalebench.def"],
                       cwd=context, check=True, env=env)
    return image_digest(str(output))


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m scalebench.images",
                                     description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    verify = commands.add_parser("verify", help="check an image's digest before a replay")
    verify.add_argument("image", help="SIF file, or image name/ID known to the engine")
    verify.add_argument("--digest", required=True, help="expected digest, sha256:HEX")
    run = commands.add_parser("run", help="run a command in an image, its digest handed in")
    run.add_argument("image")
    run.add_argument("--no-gpus", action="store_true", help="do not request GPUs")
    run.add_argument("--bind", action="append", default=[], help="SRC:DST (repeatable)")
    image = commands.add_parser("build", help="build the Docker/podman image")
    image.add_argument("--tag", default="scalebench:latest")
    sif = commands.add_parser("build-sif", help="build the Apptainer image")
    sif.add_argument("output", type=Path, help="SIF file to write")
    sif.add_argument("--base-archive", type=Path, help="docker-archive file of the --base "
                     "image, for machines that cannot reach its registry")
    for sub in (image, sif):
        sub.add_argument("--base", help="base image NAME@sha256:HEX (default: "
                         "containers/base-image.toml)")
        sub.add_argument("--weights", type=Path, default=ROOT / "containers/weights",
                         help="folder with manifest.txt and the weights it lists")
    for sub in (verify, run, image):
        sub.add_argument("--engine", default=os.environ.get("SCALEBENCH_ENGINE", "docker"),
                         help="docker or podman, with global options (default: docker)")
    return parser


def main(argv: list[str] | None = None) -> int:
    """Everything after '--' is the command to run (run) or options for the builder (build)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    split = argv.index("--") if "--" in argv else len(argv)
    argv, rest = argv[:split], argv[split + 1:]
    args = _parser().parse_args(argv)
    try:
        if args.command == "verify":
            print(verify_image(args.image, args.digest, args.engine))
        elif args.command == "run":
            command = run_argv(args.image, rest, args.engine, not args.no_gpus, args.bind)
            return subprocess.run(command, check=False).returncode
        elif args.command == "build":
            print(build(args.engine, args.tag, args.base, args.weights, rest))
        else:
            print(build_sif(args.output, args.base, args.weights, rest, args.base_archive))
        return EXIT_OK
    except ImageMismatch as error:
        print(f"scalebench: error: {error}", file=sys.stderr)
        return EXIT_MISMATCH
    except ScalebenchError as error:
        print(f"scalebench: error: {error}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except subprocess.CalledProcessError as error:
        print(f"scalebench: error: {error.cmd[0]} failed with exit status {error.returncode}",
              file=sys.stderr)
        return EXIT_MISMATCH


if __name__ == "__main__":
    sys.exit(main())
