"""The profiler's NVTX ranges name the rank."""

from __future__ import annotations


def test_nvtx_ranges_carry_the_rank(monkeypatch):
    import torch

    from scalebench.runtime.profiling import StepProfiler

    names = []
    monkeypatch.setattr(torch.cuda.nvtx, "range_push", names.append)
    monkeypatch.setattr(torch.cuda.nvtx, "range_pop", lambda: None)
    profiler = StepProfiler(torch.device("cpu"), "nvtx", rank_label=" rank 1")
    with profiler.step("grad"):
        pass
    assert names == ["grad rank 1"]
