"""What every column of a results file means: the one table docs/results.md is generated from
(docs/generate.py) and that tests check against the columns real runs write.

A column name is matched against the patterns below, where ``<step>`` is a measured step of an
iteration (inference: ``grad``, ``prox``, ``denoise``, the baselines' ``backproject`` and
``minor_cycle``; training: ``forward``, ``backward``,
``optimizer``), ``<name>`` a parameter name and ``<field>`` a provenance field
(provenance.schema.FIELDS, documented there). Every per-step and per-iteration figure of a
rank also comes as ``<column>_max`` and ``<column>_mean``: its maximum and mean over the ranks
(equal to it on one process). Imports no torch.
"""

from __future__ import annotations

import re

from provenance.schema import COLUMN_PREFIX, FIELDS
from scalebench.rank.names import INFERENCE_STEPS, TRAINING_STEPS

# benchopt's own columns, and the ones scalebench run adds.
RUN_COLUMNS = {
    "objective_name": "the benchmark's objective (imaging_inverse_problem, supervised_training)",
    "obj_description": "benchopt's description of the objective",
    "dataset_name": "the dataset with its parameters, as benchopt names it",
    "solver_name": "the solver with its parameters, as benchopt names it",
    "solver_description": "benchopt's description of the solver",
    "p_dataset_<name>": "the value of dataset parameter <name>",
    "p_solver_<name>": "the value of solver parameter <name>",
    "stop_val": "the iteration (training: the step) the row measures; 0 is the start",
    "time": "benchopt's solver time up to this row, seconds (set-up excluded)",
    "idx_rep": "the repetition (run option n-repetitions)",
    "base_seed": "benchopt's seed option (scalebench's seeds are parameters: seed)",
    "sampling_strategy": "how benchopt called the solver (callback)",
    "file_objective": "benchopt's record of the objective's file",
    "file_solver": "benchopt's record of the solver's file",
    "file_dataset": "benchopt's record of the dataset's file",
    "run_date": "when benchopt ran the experiment",
    "env-OMP_NUM_THREADS": "benchopt's record of OMP_NUM_THREADS",
    "platform": "benchopt's record of the operating system",
    "platform-architecture": "benchopt's record of the processor architecture",
    "platform-release": "benchopt's record of the kernel release",
    "platform-version": "benchopt's record of the kernel version",
    "system-cpus": "benchopt's record of the CPU count",
    "system-processor": "benchopt's record of the processor",
    "system-ram (GB)": "benchopt's record of the memory",
    "version-cuda": "benchopt's record of the CUDA version",
    "version-numpy": "benchopt's record of the numpy version",
    "version-numpy-libs": "benchopt's record of numpy's BLAS libraries",
    "version-scipy": "benchopt's record of the scipy version",
    "benchmark-git-tag": "benchopt's record of the benchmark's git tag",
    "experiment_id": "the experiment (dataset x solver parameter combination) the row belongs "
                     "to: the hash scalebench run names it by (scalebench.results.store)",
}

# What the objectives return (benchopt prefixes each with "objective_").
OBJECTIVE_COLUMNS = {
    "objective_value": "what benchopt plots by default: the MSE (training: the loss)",
    "objective_psnr_db": "PSNR in dB, peak = the ground truth's data range (max - min)",
    "objective_ssim": "SSIM, Gaussian window (sigma 1.5, radius 5), mean over channels and "
                      "fully covered pixels",
    "objective_mse": "mean squared error",
    "objective_snr_db": "reconstruction SNR in dB, 10 log10(|x|^2 / |x - x_hat|^2): 0 for an "
                        "all-zero estimate; radio interferometry's headline",
    "objective_asinh_psnr_db": "asinh-PSNR in dB over the dynamic range "
                               "objective_asinh_dynamic_range",
    "objective_asinh_dynamic_range": "the dynamic range D the asinh-PSNR covered",
    "objective_diverged": "true when the estimate holds a NaN or infinite value (its metrics "
                          "are NaN and the run ends there)",
    "objective_stop_reason": "how the row's run ended (the same on all its rows): complete, "
                             "time limit, diverged or pruned (see How a run ended); files "
                             "written before 2026-12-06 have none and read as complete",
    "objective_stop_iteration": "the last iteration (training: step) its run evaluated",
    "objective_<step>_time_s": "wall time of the step, device synchronised before each clock "
                               "read, seconds",
    "objective_<step>_cpu_utilization": "CPU time of the rank's threads over the step's wall "
                                        "time (2.0: two cores busy)",
    "objective_<step>_peak_host_rss_mib": "peak resident memory of the process during the "
                                          "step, MiB",
    "objective_<step>_host_rss_increase_mib": "that peak minus the resident memory just "
                                              "before the step: what the step needed, MiB",
    "objective_<step>_peak_cuda_alloc_mib": "on CUDA: the caching allocator's peak during "
                                            "the step, MiB",
    "objective_<step>_cuda_alloc_increase_mib": "on CUDA: that peak minus the memory "
                                                "allocated before the step, MiB",
    "objective_<step>_comm_time_s": "time inside collectives during the step, seconds",
    "objective_<step>_comm_bytes": "bytes handed to collectives during the step",
    "objective_prox_cg_iterations": "conjugate-gradient iterations of the latest data prox "
                                    "(0: closed form, or the warm start already met "
                                    "cg_tolerance); algorithms with a prox only",
    "objective_clean_components": "clean: components subtracted so far (it stops adding "
                                  "any once the residual's peak is below the threshold)",
    "objective_clean_beam_pixels": "clean: pixels of the dirty beam's main lobe (above half "
                                   "its peak) the Gaussian clean beam was fitted to",
    "objective_comm_time_s": "time inside collectives over the iteration, seconds",
    "objective_comm_bytes": "bytes handed to collectives over the iteration",
    "objective_host_memory_method": "how host peaks were measured: vmhwm_reset (the step's "
                                    "own peak), lifetime_peak (the process's lifetime "
                                    "peak, an upper bound; ru_maxrss_lifetime in files "
                                    "written before 2026-12-03) or vmhwm_reset_forked (the "
                                    "step's own peak in a tuning trial's process, forked "
                                    "from a preloaded server: lower than a fresh process's "
                                    "by the library pages it did not touch)",
    "objective_setup_time_s": "the run's set-up (operators, measurements, weights, operator "
                              "norm, initial estimate, compilation), seconds",
    "objective_compile_time_s": "the denoiser's compilation alone (solver parameter "
                                "compile), seconds",
    "objective_operator_norm_time_s": "||A||^2 (Lanczos, or read from its cache), seconds",
    "objective_operator_norm_iterations": "applications of A^T A that ||A||^2 took (0: read "
                                          "from the cache)",
    "objective_operator_norm_start_iterations": "applications of the cheap start operator "
                                                "that seeded the Lanczos iteration",
    "objective_operator_norm_start_time_s": "of objective_operator_norm_time_s, the start "
                                            "operator's share, seconds (0: no start "
                                            "operator, or the norm read from the cache)",
    # what the step of a run was (pnp; absent from files written before 2026-12-07)
    "objective_operator_norm_sq": "pnp: ||A||^2, the operator norm squared the run used "
                                  "(Lanczos, or read from its cache)",
    "objective_step_size": "pnp: gamma, the step the run used: step_size, else step_scale / "
                           "||A||^2 (NaN: dpir, whose gammas follow its schedule)",
    # training
    "objective_loss": "the training loss of the step",
    "objective_grad_norm": "the gradient norm of the step (before clipping)",
    "objective_step_time_s": "the whole training step (forward, backward, optimizer), seconds",
    "objective_step_peak_host_rss_mib": "the largest host peak of the step's parts, MiB",
    "objective_step_peak_cuda_alloc_mib": "on CUDA: the largest allocator peak of the step's "
                                          "parts, MiB",
    "objective_step_peak_increase_host_rss_mib": "that peak minus the memory before the "
                                                 "step, MiB",
    "objective_step_peak_increase_cuda_alloc_mib": "on CUDA: that peak minus the memory "
                                                   "allocated before the step, MiB",
    "objective_saved_activations_mib": "activations saved for the backward pass, MiB (NaN "
                                       "where not counted)",
    "objective_throughput_pixels_per_s": "training pixels (voxels) per second of step",
    "objective_checkpointing_used": "the activation checkpointing mode the step ran",
    "objective_activation_estimate_mib": "'auto' checkpointing's estimate of the chosen "
                                         "mode's activations, MiB",
    # provenance, one column per field of provenance.schema.FIELDS
    "prov_<field>": "provenance: see the provenance table",
}

# The columns ``scalebench tune`` adds to every row of its results file (scalebench.tuning).
TUNING_COLUMNS = {
    "tune_study": "tuning: the study (one per configuration tuned) the row's trial belongs to",
    "tune_trial": "tuning: the trial's number in its study",
    "tune_state": "tuning: how the trial ended for the search: complete, pruned or fail",
    "tune_cpu_s": "tuning: CPU seconds of the trial's processes (its launch and experiments), "
                  "the same on each of its rows; absent from tunings written before 2026-12-07",
}

RANK_STATISTICS = ("_max", "_mean")


def _regex(pattern: str) -> re.Pattern:
    parts = re.split(r"(<step>|<name>|<field>)", pattern)
    steps = "|".join(INFERENCE_STEPS + TRAINING_STEPS)
    fields = "|".join(map(re.escape, FIELDS))
    holes = {"<step>": f"(?:{steps})", "<name>": r"\w+", "<field>": f"(?:{fields})"}
    return re.compile("".join(holes.get(part, re.escape(part)) for part in parts))


_PATTERNS = [(pattern, _regex(pattern)) for pattern in (*RUN_COLUMNS, *OBJECTIVE_COLUMNS,
                                                          *TUNING_COLUMNS)]


def column_pattern(column: str) -> str | None:
    """The documented pattern a results column matches (its rank statistics included); None
    for a column nobody documented."""
    names = [column, *(column.removesuffix(s) for s in RANK_STATISTICS if column.endswith(s))]
    if column.startswith(COLUMN_PREFIX):
        names.append(column)
    for name in names:
        for pattern, regex in _PATTERNS:
            if regex.fullmatch(name):
                return pattern
    return None
