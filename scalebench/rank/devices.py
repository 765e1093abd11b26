"""Which device a run takes: the one rule behind the ``device`` parameter's 'auto', used by
the ranks (rank.context), ``plan`` (GPUs to request) and ``capacity`` (host or device
memory). Imports torch only when asked about CUDA, so config checks stay light."""

from __future__ import annotations

DEVICES = ("auto", "cpu", "cuda")


def cuda_available() -> bool:
    import torch

    return torch.cuda.is_available()


def device_type(name: str) -> str:
    """'cuda' or 'cpu': the device type a run with ``device`` ``name`` takes on this machine
    ('auto': CUDA when there is one). 'cuda' stays 'cuda' here: a plan may be for another
    machine; the ranks check it (rank.context.resolve_device)."""
    if name == "auto":
        return "cuda" if cuda_available() else "cpu"
    return name
