"""Names the rows and the run parameters use, in one place, without importing torch: the
quality metrics every row carries (``scalebench.rank.metrics`` computes them, the report
plots them, ``replay`` compares them), the profiler's modes (the ``profiler`` parameter,
``scalebench.rank.profiling``) and how host peaks were measured."""

from __future__ import annotations

# Result column suffix (objective_<name>) -> axis label; metrics.quality_metrics returns these
# keys (NaN for a diverging estimate).
QUALITY_METRICS = {"psnr_db": "PSNR (dB)", "ssim": "SSIM", "mse": "MSE", "snr_db": "SNR (dB)",
                   "asinh_psnr_db": "asinh-PSNR (dB)"}
METRIC_NAMES = tuple(QUALITY_METRICS)


def metric_column(name: str) -> str:
    """The result column of metric ``name`` (benchopt prefixes objective values)."""
    return f"objective_{name}"


# The steps whose time and peak memory each row records (<step>_time_s, <step>_peak_*): an
# inference iteration's (scalebench.loops.pnp, .denoising; the baselines: cgls's iteration is a
# "grad", fbp's and fdk's filtering and back-projection "backproject", clean's components
# "minor_cycle") and a training step's.
INFERENCE_STEPS = ("grad", "prox", "denoise", "backproject", "minor_cycle")
TRAINING_STEPS = ("forward", "backward", "optimizer")

# The profiler's modes (scalebench.rank.profiling): light (clock and memory), torch (also a
# torch.profiler trace), nvtx (also NVTX ranges).
PROFILER_MODES = ("light", "torch", "nvtx")
# How host peaks are measured (scalebench.rank.profiling.HostPeakMemory): the peak since a
# reset of the process's high-water mark, or, where the system allows no reset, the process's
# lifetime peak (an upper bound). Files written before 2026-12-03 name the latter
# 'ru_maxrss_lifetime'.
HOST_PEAK_SINCE_RESET, HOST_PEAK_LIFETIME = "vmhwm_reset", "lifetime_peak"
# The peak since a reset in a process forked from a preloaded server (scalebench.launch.
# preloaded: a tuning's trials): the libraries' pages it has not touched since the fork are
# not in its resident set, so its peaks read lower than a fresh process's (by up to about
# 630 MiB for torch and deepinv on CPU); its increases are the same.
HOST_PEAK_SINCE_RESET_FORKED = "vmhwm_reset_forked"
HOST_METHODS = (HOST_PEAK_SINCE_RESET, HOST_PEAK_LIFETIME, HOST_PEAK_SINCE_RESET_FORKED)
