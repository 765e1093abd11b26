"""The parameters of every inference solver (pnp, denoiser, the baselines cgls, fbp, fdk and
clean; the training solver's are in scalebench.loops.training.parameters) and of every run,
their specs
(``PNP_SPEC``, ``DENOISING_SPEC``, ``BASELINE_SPECS``), and the checks of a run's distribution
across ranks. Imports no torch: the checks of a config read them before anything runs."""

from __future__ import annotations

import math
from dataclasses import replace

from scalebench.denoisers.catalog import DENOISERS
from scalebench.denoisers.tiles import count_tiles, dealt_batch_count
from scalebench.errors import ConfigError
from scalebench.loops.algorithms import ALGORITHMS
from scalebench.loops.algorithms.spec import check_step
from scalebench.loops.spec import SolverSpec
from scalebench.param_spec import Param, resolved_parameters, validate_parameters
from scalebench.rank.devices import DEVICES
from scalebench.rank.names import PROFILER_MODES

# Resources of one run under benchopt's submitit backend (``--parallel-config``): benchopt
# hands every ``slurm_*`` solver parameter to submitit, so resources can be swept like any
# parameter. Unset (null) ones fall back to the parallel config; other launchers ignore them.
SLURM_PARAMS = {
    "slurm_nodes": Param(None, int, minimum=1, nullable=True, omitted_at_default=True,
                         doc="nodes of the run's job"),
    "slurm_ntasks_per_node": Param(None, int, minimum=1, nullable=True,
                                   omitted_at_default=True,
                                   doc="ranks per node of the run's job"),
    "slurm_gres": Param(None, str, nullable=True, omitted_at_default=True,
                        doc="generic resources, e.g. 'gpu:4'"),
    "slurm_time": Param(None, str, nullable=True, omitted_at_default=True,
                        doc="time limit of the run's job"),
}

# Parameters of every run, inference and training alike (each loop's table lists them
# where its parameters read best).
RUN_PARAMS = {
    "device": Param("auto", str, choices=DEVICES, doc="auto: cuda if present"),
    "profiler": Param("light", str, choices=PROFILER_MODES, doc="profiling detail"),
    "max_iter": Param(20, int, minimum=1, doc="iterations of the loop (training: steps)"),
    "seed": Param(0, int, minimum=0, doc="seed of the run's random draws: weights, added "
                                         "noise, training patches"),
    "deterministic": Param(True, bool, doc="deterministic mode (scalebench.rank."
                                           "determinism)"),
    "num_threads": Param(0, int, minimum=0, doc="torch intra-op threads; 0: keep default"),
}

# Windows per denoiser call by default: bounds the denoiser's memory to that of this many
# windows, whatever the image size (0 concatenates every window: memory grows with the image).
DEFAULT_BATCH = 4

DENOISER_PARAMS = {
    "denoiser": Param("tv", str, choices=DENOISERS, doc="denoiser architecture"),
    "pretrained": Param("auto", str, doc="'auto' (deepinv's published weights when in the "
                                         "torch hub cache, else 'bundled'), 'bundled' (the "
                                         "small networks scalebench ships), 'hub', 'none' "
                                         "(seeded random weights: cost only) or a .pth path"),
    "denoiser_sigma": Param(0.05, float, minimum=0.0, doc="noise level given to the denoiser"),
    "tile_size": Param(0, int, minimum=0, doc="tile core size in pixels; 0: no tiling"),
    "tile_overlap": Param(0, int, minimum=0, doc="extra pixels around each tile core"),
    "tiles_per_batch": Param(DEFAULT_BATCH, int, minimum=0,
                            doc=f"windows per denoiser call (default {DEFAULT_BATCH}: the "
                                f"denoiser holds at most that many windows); 0: all at once"),
    "device": RUN_PARAMS["device"],
    "profiler": RUN_PARAMS["profiler"],
    "max_iter": RUN_PARAMS["max_iter"],
    "eval_every": Param(1, int, minimum=1, doc="evaluate every k-th iteration (the first "
                                               "and the last always)"),
    "seed": RUN_PARAMS["seed"],
    "deterministic": RUN_PARAMS["deterministic"],
    "num_threads": RUN_PARAMS["num_threads"],
    "distribute_denoiser": Param(False, bool, doc="split the denoiser's tiles across ranks"),
    "compile": Param(False, bool, doc="run the denoiser through torch.compile (compile time "
                                      "reported apart)"),
    "save_estimate": Param(False, bool, doc="keep the initial and final estimates and the "
                                            "ground truth (scalebench.results.estimates)"),
    **SLURM_PARAMS,
}


# The standalone denoiser timing (scalebench.loops.denoising).
DENOISING_PARAMS = dict(DENOISER_PARAMS)

# Plug-and-play reconstruction (scalebench.loops.pnp, scalebench.loops.algorithms).
INITS = ("zeros", "adjoint", "pseudo_inverse", "dirty")
PNP_PARAMS = {
    **DENOISER_PARAMS,
    "algorithm": Param("pgd", str, choices=tuple(ALGORITHMS),
                       doc="pgd: proximal gradient; fista: accelerated; hqs: half-quadratic "
                           "splitting; admm; drs: Douglas-Rachford; dpir: HQS with DPIR's "
                           "decreasing denoiser level; red: regularisation by denoising"),
    "step_size": Param(None, float, minimum=0.0, nullable=True,
                       doc="gamma: the gradient step (pgd, fista, red) or the data prox's "
                           "weight (hqs, admm, drs); null: step_scale / ||A||^2"),
    # Added 2026-12 (tuning): left out of the record while null, so earlier runs keep their
    # hashes.
    "step_scale": Param(None, float, minimum=0.0, exclusive_minimum=True, nullable=True,
                        omitted_at_default=True,
                        doc="gamma in units of 1 / ||A||^2 (||A||^2 by Lanczos), used when "
                            "step_size is null (give one of the two); null: 1 for a gradient "
                            "step, 10 for a prox"),
    "relaxation": Param(1.0, float, minimum=0.0, maximum=2.0,
                        doc="beta: over-relaxation of pgd and hqs, dual step of admm and drs"),
    "fista_a": Param(3.0, float, minimum=2.0,
                     doc="fista: momentum (k + a - 1) / (k + a) at iteration k"),
    "red_lambda": Param(1.0, float, minimum=0.0,
                        doc="red: weight of the denoising residual x - D(x)"),
    "dpir_sigma_start": Param(49 / 255, float, minimum=0.0,
                              doc="dpir: the first denoiser level (the last is "
                                  "denoiser_sigma); must exceed denoiser_sigma"),
    "dpir_lambda": Param(0.23, float, minimum=0.0,
                         doc="dpir: gamma_k = (sigma_k / max(0.01, denoiser_sigma))^2 / "
                             "dpir_lambda"),
    "cg_tolerance": Param(1e-4, float, minimum=1e-12, maximum=0.5,
                          doc="data prox (hqs, admm, drs, dpir): conjugate gradient stops at "
                              "this residual relative to the right-hand side"),
    "cg_max_iter": Param(50, int, minimum=1,
                         doc="data prox: at most this many conjugate-gradient iterations per "
                             "call (their count is on every row)"),
    "init": Param("adjoint", str, choices=INITS, doc="initial estimate"),
    "distribute_physics": Param(False, bool, doc="each rank builds and applies only its share "
                                                 "of the operators A_k"),
}


def check_pnp(problem, values: dict, shape: tuple[int, ...], params: dict) -> None:
    """Raise ConfigError when the algorithm cannot run on this dataset or its schedule is
    not a schedule."""
    algorithm = ALGORITHMS[params["algorithm"]]
    check_step(params)
    if algorithm.needs_prox and not problem.data_prox:
        allowed = ", ".join(name for name, spec in ALGORITHMS.items() if not spec.needs_prox)
        raise ConfigError(f"algorithm '{algorithm.name}' needs the data term's proximal "
                          f"operator, which dataset '{problem.name}' does not offer (use "
                          f"{allowed})")
    if algorithm.name == "dpir" and params["dpir_sigma_start"] <= params["denoiser_sigma"]:
        raise ConfigError(f"algorithm 'dpir': dpir_sigma_start ({params['dpir_sigma_start']}) "
                          f"must exceed denoiser_sigma ({params['denoiser_sigma']}): the "
                          f"denoiser level decreases from the first to the last")


# The classical baselines (scalebench.loops.cgls, .fbp, .fdk, .clean): no denoiser, so none of its
# parameters; the physics may be distributed as pnp's.
BASELINE_PARAMS = {
    "device": RUN_PARAMS["device"],
    "profiler": RUN_PARAMS["profiler"],
    "max_iter": RUN_PARAMS["max_iter"],
    "eval_every": DENOISER_PARAMS["eval_every"],
    "seed": RUN_PARAMS["seed"],
    "deterministic": RUN_PARAMS["deterministic"],
    "num_threads": RUN_PARAMS["num_threads"],
    "distribute_physics": PNP_PARAMS["distribute_physics"],
    "save_estimate": DENOISER_PARAMS["save_estimate"],
    **SLURM_PARAMS,
}
CGLS_PARAMS = {
    **BASELINE_PARAMS,
    "max_iter": Param(20, int, minimum=1, doc="CG iterations, one row each: the "
                                              "semi-convergence curve"),
}

# Filtered back-projection (scalebench.loops.fbp): one step, so one iteration.
FBP_FILTERS = ("ram-lak", "shepp-logan", "cosine", "hamming", "hann")
FBP_PARAMS = {
    **BASELINE_PARAMS,
    "max_iter": Param(1, int, minimum=1, maximum=1,
                      doc="1: FBP is one step (rows: the zero start, then the reconstruction)"),
    "filter": Param("ram-lak", str, choices=FBP_FILTERS,
                    doc="the ramp (ram-lak) or the ramp times a window damping high "
                        "frequencies"),
}

# FDK (scalebench.loops.fdk): cone-beam's filtered back-projection, one step; the same
# filters as fbp's, applied along the detector rows.
FDK_PARAMS = {
    **FBP_PARAMS,
    "max_iter": replace(FBP_PARAMS["max_iter"], doc="1: FDK is one step (rows: the zero "
                                                    "start, then the reconstruction)"),
    "filter": replace(FBP_PARAMS["filter"], doc=FBP_PARAMS["filter"].doc
                      + ", along the detector rows"),
}

# Högbom CLEAN (scalebench.loops.clean): its budget is max_iter x components_per_iter.
CLEAN_PARAMS = {
    **BASELINE_PARAMS,
    "max_iter": Param(20, int, minimum=1, doc="iterations (rows), each of "
                                              "components_per_iter components"),
    "gain": Param(0.1, float, minimum=0.0, exclusive_minimum=True, maximum=1.0,
                  doc="fraction of the residual's peak each component removes"),
    "threshold": Param(0.0, float, minimum=0.0, maximum=1.0,
                       doc="stop once the residual's peak is below this fraction of the "
                           "dirty image's peak"),
    "components_per_iter": Param(100, int, minimum=1,
                                 doc="components subtracted per iteration (between rows)"),
    # The model by default: a row is scored against the ground truth pixel by pixel, where the
    # restored image's beam-spread flux counts as error (docs/datasets-and-solvers.md).
    "image": Param("model", str, choices=("model", "restored"),
                   doc="what each row scores: the model's point components (what a comparison "
                       "with the ground truth measures) or the restored image (model "
                       "convolved with the clean beam, plus the residual: what astronomers "
                       "read)"),
}


def evaluations(params: dict) -> int:
    """Rows a run records: iterations 0, k, 2k, ... and always the last (k = eval_every)."""
    return math.ceil(params["max_iter"] / params["eval_every"]) + 1


def check_distribution(params: dict, image_shape: tuple[int, ...], num_operators: int,
                       world_size: int) -> None:
    """Raise ConfigError when a rank would have no work or every rank the same work."""
    if world_size <= 1:
        return
    # A baseline has no denoiser, hence no tiles to split.
    physics = params.get("distribute_physics", False)
    tiles = params.get("distribute_denoiser", False)
    if not (physics or tiles):
        raise ConfigError(f"{world_size} ranks but neither distribute_physics nor "
                          f"distribute_denoiser is true: every rank would repeat the same work")
    if physics and num_operators < world_size:
        raise ConfigError(f"distribute_physics: {num_operators} operator(s) for {world_size} "
                          f"ranks leaves ranks without work (use at most {num_operators} ranks "
                          f"or more operators)")
    if not tiles:
        return
    tile_count = count_tiles(params, image_shape)
    batches = dealt_batch_count(tile_count, params["tiles_per_batch"])
    if batches < world_size:
        raise ConfigError(f"distribute_denoiser: {tile_count} tile(s) in {batches} batch(es) "
                          f"of tiles_per_batch {params['tiles_per_batch']} for {world_size} "
                          f"ranks leaves ranks without work (lower tile_size or "
                          f"tiles_per_batch, or use fewer ranks)")


# The denoiser's tiles took the training benchmark's names (2026-12): the old ones still work.
TILE_RENAMES = {"patch_size": "tile_size", "overlap": "tile_overlap",
                "max_batch_size": "tiles_per_batch"}

PNP_SPEC = SolverSpec("pnp", "plug-and-play reconstruction (the algorithm parameter picks "
                             "the iteration)", PNP_PARAMS, uses_operator=True,
                      uses_denoiser=True, check_problem=check_pnp, renamed=TILE_RENAMES)
DENOISING_SPEC = SolverSpec("denoiser", "the denoiser alone on the noisy ground truth "
                                        "(its time and memory)", DENOISING_PARAMS,
                            uses_operator=False, uses_denoiser=True, renamed=TILE_RENAMES)


CGLS_SPEC = SolverSpec("cgls", "conjugate gradient on the normal equations, unregularised "
                              "(one row per iteration: the semi-convergence curve)",
                       CGLS_PARAMS, uses_operator=True, uses_denoiser=False)
FBP_SPEC = SolverSpec("fbp", "filtered back-projection of 2D parallel-beam CT (one step)",
                      FBP_PARAMS, uses_operator=True, uses_denoiser=False,
                      datasets=("tomography_2d",))
FDK_SPEC = SolverSpec("fdk", "Feldkamp-Davis-Kress filtered back-projection of circular "
                             "cone-beam CT (one step)", FDK_PARAMS, uses_operator=True,
                      uses_denoiser=False, datasets=("walnut_conebeam",))
CLEAN_SPEC = SolverSpec("clean", "Högbom CLEAN of radio interferometry, its components "
                                  "scored (or its image restored with a Gaussian clean beam)",
                        CLEAN_PARAMS, uses_operator=True, uses_denoiser=False,
                        datasets=("radio_interferometry",))
BASELINE_SPECS = (CGLS_SPEC, FBP_SPEC, FDK_SPEC, CLEAN_SPEC)


def pnp_parameters(**values) -> dict:
    """Every parameter of a ``pnp`` run: ``values`` checked against PNP_PARAMS, defaults
    for the rest (for loops run outside benchopt: tests, tools)."""
    return solver_parameters(PNP_SPEC, **values)


def solver_parameters(spec: SolverSpec, **values) -> dict:
    """Every parameter of a run of ``spec``: ``values`` checked, defaults for the rest."""
    return resolved_parameters(validate_parameters(f"solver '{spec.name}'", values,
                                                   spec.params), spec.params)
