"""Which libraries the operators can run on here, without loading them: ASTRA (and whether
it can use CUDA), ITK-RTK, and the radio-interferometry visibility libraries (ducc0, finufft and
cufinufft, deepinv's torchkbnufft, or the exact DFT). Imports no torch: the checks of a config
read it before anything runs."""

from __future__ import annotations

import importlib.util
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch

# The cone-beam projectors (scalebench.physics.conebeam).
CONEBEAM_PROJECTORS = ("torch", "rtk", "astra")
# The radio visibility operator's libraries ('auto': the fastest accurate one installed).
BACKENDS = ("auto", "ducc0", "finufft", "torchkbnufft", "dft")


# Fastest accurate first, per device type (tools/radio_operators.py), with the Python module
# each needs on that device.
PREFERENCE = {"cpu": (("ducc0", "ducc0"), ("finufft", "finufft"),
                      ("torchkbnufft", "torchkbnufft")),
              "cuda": (("finufft", "cufinufft"), ("torchkbnufft", "torchkbnufft"))}


INSTALL_HINT = "pip install 'scalebench[radio]'"


def resolve_backend(name: str, device: torch.device | str) -> str:
    """The library behind ``name`` on ``device``: ``auto`` picks the fastest accurate one
    among those installed."""
    if name != "auto":
        return name
    kind = getattr(device, "type", device)
    preference = PREFERENCE.get(kind, PREFERENCE["cpu"])
    for backend, module in preference:
        if importlib.util.find_spec(module):
            return backend
    hint = INSTALL_HINT if kind == "cpu" else "pip install 'scalebench[radio-cuda]'"
    raise RuntimeError(f"backend 'auto' on {kind} found none of "
                       f"{', '.join(module for _, module in preference)} installed ({hint})")


def check_installed(name: str) -> None:
    """Raise ValueError when the CPU library of backend ``name`` is not installed."""
    try:
        library = resolve_backend(name, "cpu")
    except RuntimeError as error:
        raise ValueError(str(error)) from None
    if library != "dft" and importlib.util.find_spec(library) is None:
        raise ValueError(f"backend '{name}' needs the {library} package ({INSTALL_HINT})")


def astra_available(cuda: bool = False) -> bool:
    """True when ASTRA is installed and, with ``cuda``, can use a CUDA device (its 3D
    projectors and its 2D projector on CUDA tensors need one)."""
    try:
        import astra
    except ImportError:
        return False
    return bool(astra.use_cuda()) if cuda else True


def rtk_available() -> bool:
    """True when ITK-RTK (the ``rtk`` extra) is installed (found without importing ITK, whose
    import takes tens of seconds)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        version("itk-rtk")
    except PackageNotFoundError:
        return False
    return True
