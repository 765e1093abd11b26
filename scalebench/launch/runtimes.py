"""Container runtimes, as ReFrame's container platforms: one class per runtime (``none``: the
host, ``apptainer``, ``docker``, ``podman``), each turning a :class:`Launch` (command, image,
working folder, variables handed in, binds, GPUs) into its command line, and each saying how
it places a launch in its image. Nothing outside these classes asks which runtime it holds.

Standard library only: the launcher and the batch scripts run it with any host Python.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar

from scalebench.errors import ScalebenchError
from scalebench.launch.images import (
    ImageIdentity,
    NamedImage,
    engine_command,
    engine_image_identity,
    sif_identity,
)


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

    def __init__(self, engine: Sequence[str] | None = None) -> None:
        self.engine = list(engine) if engine else [self.name]

    @abstractmethod
    def command_line(self, launch: Launch) -> list[str]:
        """The argv that runs ``launch.command``."""

    def interpreter(self, repo: str) -> str:
        """The Python a launch's command is given to: the image's."""
        return "python"

    def identity(self, image: str) -> ImageIdentity | None:
        """What must be handed in for rows to record the image; None: nothing."""
        return None

    @abstractmethod
    def image_reference(self, image: NamedImage) -> str | None:
        """The image this runtime starts, which it requires; None when it starts none."""

    @abstractmethod
    def contain(self, launch: Launch, image: NamedImage, binds: list[str]) -> Launch:
        """``launch`` placed in ``image`` with the folders ``binds`` names."""


class Host(Runtime):
    """No container: the command itself; variables reach it through the process environment
    and the host's GPUs are all visible (CUDA_VISIBLE_DEVICES selects)."""

    name = "none"

    def command_line(self, launch: Launch) -> list[str]:
        return list(launch.command)

    def interpreter(self, repo: str) -> str:
        return f"{repo}/.venv/bin/python"

    def image_reference(self, image: NamedImage) -> str | None:
        return None

    def contain(self, launch: Launch, image: NamedImage, binds: list[str]) -> Launch:
        return launch  # the host's own folders, as they are


class ContainerRuntime(Runtime):
    """A runtime that starts an image, named by SB_IMAGE."""

    image_kind: ClassVar[str] = "the image"  # what SB_IMAGE names, in its error

    @abstractmethod
    def handed_identity(self, reference: str, image: NamedImage) -> ImageIdentity | None:
        """The identity handed into the container; None: nothing."""

    def started_image(self, reference: str, identity: ImageIdentity | None) -> str:
        """What the command line starts: the image as named."""
        return reference

    def image_reference(self, image: NamedImage) -> str:
        if not image.reference:
            raise ScalebenchError(f"SB_IMAGE must name {self.image_kind} "
                                  f"(SB_RUNTIME={self.name})")
        return image.reference

    def contain(self, launch: Launch, image: NamedImage, binds: list[str]) -> Launch:
        reference = self.image_reference(image)
        identity = self.handed_identity(reference, image)
        launch.image = self.started_image(reference, identity)
        if identity is not None:
            launch.env.update(identity.variables())
        launch.binds = binds
        return launch


class Apptainer(ContainerRuntime):
    """``apptainer exec --cleanenv``: the image's own environment plus what is handed in.

    A SIF's processes can read their image, but each would hash all of it (seconds per
    gigabyte, per rank): its digest is taken once and handed in as well."""

    name = "apptainer"
    image_kind = "the SIF file"

    def identity(self, image: str) -> ImageIdentity:
        return sif_identity(image)

    def handed_identity(self, reference: str, image: NamedImage) -> ImageIdentity | None:
        # The digest the batch script took once per job; unset, each rank reads its SIF.
        return ImageIdentity(image.digest, None) if image.digest else None

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


class Docker(ContainerRuntime):
    """``docker run``: host network and IPC (collectives, shared memory), explicit variables.

    The engine exposes the GPUs; inside they are numbered from 0, so CUDA_VISIBLE_DEVICES
    is not handed in. A container cannot read its own image: its ID and labels are handed in
    and it is started by that ID, so what runs is what the rows record.
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

    def build_options(self, source_date_epoch: str) -> list[str]:
        """Options of ``build`` that make the image reproducible: none of docker's."""
        return []

    def identity(self, image: str) -> ImageIdentity:
        return engine_image_identity(self.engine, image)

    def handed_identity(self, reference: str, image: NamedImage) -> ImageIdentity:
        """SB_IMAGE_DIGEST / SB_IMAGE_LABELS_JSON (the batch script resolves them once per
        job), else the engine's answer now."""
        if not image.digest:
            return self.identity(reference)
        labels = image.labels()
        return ImageIdentity(image.digest, self.identity(image.digest).labels
                             if labels is None else labels)

    def started_image(self, reference: str, identity: ImageIdentity | None) -> str:
        return identity.digest if identity is not None else reference


class Podman(Docker):
    """``podman run``: like docker, GPUs through CDI (podman has no ``--gpus`` before 5.0)."""

    name = "podman"

    def gpu_options(self, devices: list[str]) -> list[str]:
        options = []
        for device in devices or ["all"]:
            options += ["--device", f"nvidia.com/gpu={device}"]
        return options

    def build_options(self, source_date_epoch: str) -> list[str]:
        # Layer files and history get this time instead of the clock's.
        return ["--timestamp", source_date_epoch]


RUNTIMES: dict[str, type[Runtime]] = {kind.name: kind for kind in (Host, Apptainer, Docker,
                                                                    Podman)}


def get_runtime(name: str, engine: Sequence[str] | str | None = None) -> Runtime:
    """The runtime called ``name``; ``engine`` is its command with global options."""
    if name not in RUNTIMES:
        raise ScalebenchError(f"SB_RUNTIME must be {', '.join(list(RUNTIMES)[:-1])} or "
                              f"{list(RUNTIMES)[-1]}, got {name!r}")
    return RUNTIMES[name](engine_command(engine) if engine is not None else None)


def engine_runtime(engine: Sequence[str] | str) -> Docker:
    """Docker or Podman, from an engine command such as ``podman --root DIR``."""
    command = engine_command(engine)
    return (Podman if Path(command[0]).name == "podman" else Docker)(command)
