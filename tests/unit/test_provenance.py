"""The provenance package in-process: canonical JSON, array digests, the visible GPUs
(what collect() records, which runs git: tests/integration/test_provenance_collect.py)."""

import hashlib

import numpy as np
import pytest
import torch

import provenance


def test_canonical_json_is_order_independent_and_strict():
    a = provenance.canonical_json({"b": 1, "a": {"y": 0.1, "x": None}})
    b = provenance.canonical_json({"a": {"x": None, "y": 0.1}, "b": 1})
    assert a == b == '{"a":{"x":null,"y":0.1},"b":1}'
    assert provenance.config_hash(a) == hashlib.sha256(a.encode()).hexdigest()
    with pytest.raises(ValueError, match="non-finite"):
        provenance.canonical_json({"a": float("nan")})
    with pytest.raises(TypeError, match="cannot hold a object"):
        provenance.canonical_json({"a": object()})


def test_array_digest_covers_dtype_shape_and_bytes():
    x = np.arange(6, dtype=np.float32)
    assert provenance.array_digest(x) == provenance.array_digest(torch.arange(6.0))
    assert provenance.array_digest(x) != provenance.array_digest(x.reshape(2, 3))
    assert provenance.array_digest(x) != provenance.array_digest(x.astype(np.float64))
    y = x.copy()
    y[3] = np.nextafter(y[3], np.float32(10))
    assert provenance.array_digest(x) != provenance.array_digest(y)
    assert provenance.array_digest(torch.arange(6.0).reshape(3, 2).T) == \
        provenance.array_digest(np.arange(6, dtype=np.float32).reshape(3, 2).T)


class _FakeNode:
    """NVML's answers on a node of four GPUs, the first split into two MIG instances (this
    machine has none to ask). Handles are positions in ``models``: 4 and 5 are the MIGs."""

    models = ["NVIDIA H200", "NVIDIA H200", "NVIDIA A100", "NVIDIA A100",
              "NVIDIA H200 MIG 3g.71gb", "NVIDIA H200 MIG 3g.71gb"]
    uuids = ["GPU-aaaa0000", "GPU-bbbb1111", "GPU-cccc2222", "GPU-dddd3333",
             "MIG-eeee4444", "MIG-ffff5555"]

    def install(self, monkeypatch):
        import pynvml

        def max_migs(handle):
            if handle != 0:
                raise pynvml.NVMLError(pynvml.NVML_ERROR_NOT_SUPPORTED)
            return 7

        def mig(handle, slot):
            if slot > 1:
                raise pynvml.NVMLError(pynvml.NVML_ERROR_NOT_FOUND)
            return 4 + slot

        for name, function in {
            "nvmlInit": lambda: None, "nvmlShutdown": lambda: None,
            "nvmlDeviceGetCount": lambda: 4, "nvmlDeviceGetHandleByIndex": lambda i: i,
            "nvmlDeviceGetName": lambda i: self.models[i],
            "nvmlDeviceGetUUID": lambda i: self.uuids[i].encode(),
            "nvmlSystemGetDriverVersion": lambda: b"580.65",
            "nvmlDeviceGetMaxMigDeviceCount": max_migs,
            "nvmlDeviceGetMigDeviceHandleByIndex": mig,
        }.items():
            monkeypatch.setattr(pynvml, name, function)


@pytest.mark.parametrize(("visible", "count", "models"), [
    (None, 4, "NVIDIA H200,NVIDIA H200,NVIDIA A100,NVIDIA A100"),
    ("2,3", 2, "NVIDIA A100,NVIDIA A100"),
    ("GPU-bbbb", 1, "NVIDIA H200"),
    ("1,7,2", 1, "NVIDIA H200"),  # CUDA stops at the first entry naming no device
    ("", 0, "none"),
    ("MIG-ffff", 1, "NVIDIA H200 MIG 3g.71gb"),  # a MIG instance named by its UUID
    ("4", 0, "none"),  # numbers name whole GPUs only
])
def test_gpu_count_counts_the_visible_devices(monkeypatch, visible, count, models):
    from provenance.process import _gpus

    _FakeNode().install(monkeypatch)
    if visible is None:
        monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    else:
        monkeypatch.setenv("CUDA_VISIBLE_DEVICES", visible)
    record = _gpus()
    assert (record["gpu_count"], record["gpu_models"], record["gpu_driver"]) == \
        (count, models, "580.65")
