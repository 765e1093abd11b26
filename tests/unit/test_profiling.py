"""The profiler's NVTX ranges name the rank; the memory a set-up freed is handed back."""

from __future__ import annotations

import platform

import pytest


def test_nvtx_ranges_carry_the_rank(monkeypatch):
    import torch

    from scalebench.rank.profiling import StepProfiler

    names = []
    monkeypatch.setattr(torch.cuda.nvtx, "range_push", names.append)
    monkeypatch.setattr(torch.cuda.nvtx, "range_pop", lambda: None)
    profiler = StepProfiler(torch.device("cpu"), "nvtx", rank_label=" rank 1")
    with profiler.step("grad"):
        pass
    assert names == ["grad rank 1"]


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc",
                    reason="glibc's heap keeps freed blocks; other allocators differ")
def test_release_hands_back_the_heap_blocks_freed_between_live_ones():
    """64 KiB blocks stay in glibc's heap; freeing every other one leaves holes that the heap
    keeps (no free at its top to shrink it), and releasing hands most of them back."""
    import numpy as np
    import torch

    from scalebench.rank.profiling import HostPeakMemory, release_freed_memory

    blocks = [np.ones(64 * 1024, dtype=np.uint8) for _ in range(4000)]  # 250 MiB
    del blocks[::2]  # 125 MiB freed, between live blocks
    held = HostPeakMemory.status_mib("VmRSS:")
    release_freed_memory(torch.device("cpu"))
    assert held - HostPeakMemory.status_mib("VmRSS:") > 100
    assert sum(block.size for block in blocks) == 2000 * 64 * 1024  # the live ones stay
