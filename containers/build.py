"""Building the scalebench images: ``containers/Dockerfile`` with docker or podman, and
``containers/scalebench.def`` with apptainer (``make image-docker``, ``make image-apptainer``).

The sources staged are the files git tracks or would track (what provenance hashes) with a
weights folder; the build arguments come from git (commit, dirty flag, diff hash,
SOURCE_DATE_EPOCH) and containers/base-image.toml (the base pinned by digest). Each build
prints the digest rows will record (scalebench.launch.images.image_digest). Only the
standard library is used, so that it runs from a checkout with any Python that pyproject.toml
allows.

    python containers/build.py build [--engine podman] [--tag NAME] [--base REF] [--weights DIR]
        [-- BUILDER OPTIONS]
    python containers/build.py build-sif OUT.sif [--base REF] [--weights DIR]
        [--base-archive FILE] [-- OPTIONS]
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import tomllib
from datetime import UTC, datetime
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # run as a script: the package from this checkout
from scalebench.errors import (  # noqa: E402
    EXIT_BAD_INPUT,
    EXIT_FAILED,
    EXIT_OK,
    ScalebenchError,
    error_lines,
)
from scalebench.launch.images import DIGEST, image_digest  # noqa: E402
from scalebench.launch.runtimes import engine_runtime  # noqa: E402


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
    from provenance.process import code_state

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
    runtime = engine_runtime(engine)
    arguments = build_arguments(base)
    with tempfile.TemporaryDirectory(prefix="scalebench-context-") as folder:
        context = stage_context(Path(folder), weights.resolve())
        argv = [*runtime.engine, "build", "-f", str(context / "containers/Dockerfile"), "-t", tag,
                "--build-arg", "WEIGHTS=.build-weights"]
        argv += [f"--build-arg={key}={value}" for key, value in arguments.items()]
        argv += runtime.build_options(arguments["SOURCE_DATE_EPOCH"])
        subprocess.run([*argv, *extra, str(context)], check=True)
    return image_digest(tag, runtime.engine)


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
    parser = argparse.ArgumentParser(prog="python containers/build.py",
                                     description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    image = commands.add_parser("build", help="build the Docker/podman image")
    image.add_argument("--tag", default="scalebench:latest")
    image.add_argument("--engine", default=os.environ.get("SCALEBENCH_ENGINE", "docker"),
                       help="docker or podman, with global options (default: docker)")
    sif = commands.add_parser("build-sif", help="build the Apptainer image")
    sif.add_argument("output", type=Path, help="SIF file to write")
    sif.add_argument("--base-archive", type=Path, help="docker-archive file of the --base "
                     "image, for machines that cannot reach its registry")
    for sub in (image, sif):
        sub.add_argument("--base", help="base image NAME@sha256:HEX (default: "
                         "containers/base-image.toml)")
        sub.add_argument("--weights", type=Path, default=ROOT / "containers/weights",
                         help="folder with manifest.txt and the weights it lists")
    return parser


def main(argv: list[str] | None = None) -> int:
    """Everything after '--' is options for the builder."""
    argv = list(sys.argv[1:] if argv is None else argv)
    split = argv.index("--") if "--" in argv else len(argv)
    argv, rest = argv[:split], argv[split + 1:]
    args = _parser().parse_args(argv)
    try:
        if args.command == "build":
            print(build(args.engine, args.tag, args.base, args.weights, rest))
        else:
            print(build_sif(args.output, args.base, args.weights, rest, args.base_archive))
        return EXIT_OK
    except ScalebenchError as error:
        print(*error_lines(error), sep="\n", file=sys.stderr)
        return EXIT_BAD_INPUT
    except subprocess.CalledProcessError as error:
        print(f"scalebench: error: {error.cmd[0]} failed with exit status {error.returncode}",
              file=sys.stderr)
        return EXIT_FAILED


if __name__ == "__main__":
    sys.exit(main())
