"""Image identities: what rows record of the image they ran in, and the check of an image
against a recorded digest.

``image_digest`` is a SIF's digest (provenance/sif.py: the file's sha256 without its build
stamps) or a Docker/podman image ID, which a push or pull leaves unchanged; ``verify_image``
is the check ``scalebench verify-image`` makes before a replay (a repository digest the engine
knows is accepted too). A container is told its image's identity through DIGEST_VARIABLE and
LABELS_VARIABLE: a Docker/podman container cannot read its own image, and a SIF's processes
could, but each rank would hash gigabytes. Standard library only at module level.
"""

from __future__ import annotations

import json
import re
import shlex
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from scalebench.errors import CommandFailed, ScalebenchError

DIGEST = re.compile(r"^sha256:[0-9a-f]{64}$")
DIGEST_VARIABLE, LABELS_VARIABLE = "SCALEBENCH_IMAGE_DIGEST", "SCALEBENCH_IMAGE_LABELS_JSON"


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


@dataclass(frozen=True)
class NamedImage:
    """The image a launch names and the identity its batch script resolved once per job
    (empty when it resolved none): SB_IMAGE, SB_IMAGE_DIGEST, SB_IMAGE_LABELS_JSON."""

    reference: str  # SIF file, or image reference
    digest: str = ""
    labels_json: str = ""

    def labels(self) -> dict[str, str] | None:
        """The labels resolved with the digest; None when none were."""
        try:
            return json.loads(self.labels_json) if self.labels_json else None
        except json.JSONDecodeError as error:
            raise ScalebenchError(f"SB_IMAGE_LABELS_JSON is not JSON: {error}") from None


class ImageMismatch(CommandFailed):
    """The image exists but its digest is not the expected one."""


def engine_command(engine: Sequence[str] | str) -> list[str]:
    """An engine's command with its global options, from a string (``podman --root DIR``)
    or a list."""
    return shlex.split(engine) if isinstance(engine, str) else list(engine)


def inspect_image(engine: Sequence[str], image: str, template: str) -> str:
    """``image inspect --format TEMPLATE`` of the engine (docker or podman)."""
    result = subprocess.run([*engine, "image", "inspect", "--format", template, image],
                            capture_output=True, text=True, check=False)
    if result.returncode != 0:
        reason = (result.stderr.strip().splitlines() or ["no output"])[-1]
        raise ScalebenchError(f"cannot inspect image {image!r} with {engine[0]}: {reason}")
    return result.stdout.strip()


def engine_image_id(engine: Sequence[str], image: str) -> str:
    """The image ID of an engine's image, as 'sha256:HEX'."""
    identity = inspect_image(engine, image, "{{.Id}}")
    return identity if identity.startswith("sha256:") else f"sha256:{identity}"


def engine_image_identity(engine: Sequence[str], image: str) -> ImageIdentity:
    """The image ID and labels of an engine's image."""
    digest = engine_image_id(engine, image)
    return ImageIdentity(digest, json.loads(inspect_image(engine, digest,
                                                          "{{json .Config.Labels}}")) or {})


def sif_identity(image: str) -> ImageIdentity:
    """A SIF's digest; its labels are left to its processes."""
    from provenance.sif import SifError, sif_digest

    try:
        return ImageIdentity(sif_digest(image), None)
    except SifError as error:
        raise ScalebenchError(str(error)) from None


def image_digest(image: str, engine: str | list[str] = "docker") -> str:
    """The digest rows record: of a SIF file (provenance.sif: the file's sha256 without its
    build stamps), or the image ID of an engine's image, as 'sha256:HEX'."""
    if image.endswith(".sif") or Path(image).is_file():
        if not Path(image).is_file():
            raise ScalebenchError(f"SIF file {image} does not exist")
        return sif_identity(image).digest
    return engine_image_id(engine_command(engine), image)


def _repo_digests(image: str, engine: str | list[str]) -> list[str]:
    listed = json.loads(inspect_image(engine_command(engine), image,
                                      "{{json .RepoDigests}}")) or []
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
