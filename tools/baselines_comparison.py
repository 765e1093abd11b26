"""Classical baselines and the priors that need no weights, side by side in one run.

    python -m tools.baselines_comparison [--parts timing pnp radio clean] [--sizes 256 1024]
        [--repeats 3] [--ct-size 128] [--sr-size 128] [--ct-iterations 100]
        [--sr-iterations 40] [--sigmas 0.001 0.003 0.01 0.03] [--bm3d-sigmas]
        [--bm3d-algorithms hqs dpir] [--radio-size 128] [--radio-iterations 100]
        [--radio-denoisers tv]

Prints one table, one row per measurement, then one line per target; exits 1 when a target
is missed. Each loop is the one a rank runs (scalebench.loops), in this process, on the CPU.

- timing: seconds per call of the ``bm3d``, ``wavelet`` and ``tv`` denoisers (as
  ``make_denoiser`` builds them, untiled) on a noisy ellipse phantom at each ``--sizes``,
  grey and colour: at the smallest size one call to warm up, then the median of
  ``--repeats`` calls; at the larger ones one call (BM3D takes minutes per call at 1024² on
  two cores). No target.
- pnp: configs/examples/methods.yml's CT and super-resolution problems (its noise levels,
  frames and angles; sides ``--ct-size`` and ``--sr-size``), every algorithm with ``tv`` and
  ``wavelet`` and the algorithms ``--bm3d-algorithms`` with ``bm3d``, step sizes at their
  defaults, ``--ct-iterations`` and ``--sr-iterations`` each, and CGLS as many. Each
  algorithm and prior runs at every ``--sigmas`` (denoiser_sigma) and keeps its best: the
  strength one sigma gives depends on the algorithm (a gradient step of 1 / ||A||^2 weighs
  the prior ||A||^2 / 10 times as much as a prox of weight 10 / ||A||^2), so a single
  setting compares settings, not methods; RED also over its prior's step (``settings``).
  ``bm3d`` runs at the methods example's sigma alone unless ``--bm3d-sigmas`` (seconds per
  call). Targets: on super-resolution the best PnP-BM3D run above the best PnP-TV run over
  the same algorithms, each at its best sigma; on both problems every PnP run's best PSNR,
  at its best setting, above CGLS's best.
- radio: ``radio_interferometry`` at ``--radio-size`` (32 time steps, 4 channels, the
  example's denoiser_sigma 0.001 and dirty-image start), uniform and natural weighting: CLEAN
  (gain 0.1, 100 components per iteration; the SNR of its restored image and of its
  components alone: what `clean`'s rows record with `image` 'restored' and 'model') and
  every algorithm with each of
  ``--radio-denoisers``, ``--radio-iterations`` each, SNR per iteration. Targets: uniform
  weighting, CLEAN's components and the best PnP run above 10 dB SNR; natural weighting,
  every PnP run's final SNR above 0 dB.
- clean: CLEAN's rows of the radio part alone (seconds), when the radio part is not run.
"""

from __future__ import annotations

import sys
from functools import partial

import torch

from scalebench.denoisers.build import make_denoiser
from scalebench.loops.algorithms import ALGORITHMS
from scalebench.loops.cgls import CGLSLoop
from scalebench.loops.clean import CleanLoop
from scalebench.loops.inference_parameters import pnp_parameters
from scalebench.loops.pnp import PnPLoop
from scalebench.problems import build_problem
from scalebench.problems.phantoms import random_ellipses
from scalebench.rank.metrics import psnr, snr
from scalebench.rank.operator_norm import estimate_operator_norm
from scalebench.rank.profiling import StepProfiler
from tools.measuring import (
    Stopwatch,
    Table,
    add_repeats,
    add_sizes,
    add_threads,
    apply_threads,
    example_settings,
    print_targets,
    timed,
    tool_parser,
)

CPU = torch.device("cpu")
PARTS = ("timing", "pnp", "radio", "clean")
PRIORS = ("tv", "wavelet")  # every algorithm runs with these; bm3d with --bm3d-algorithms
# RED's prior step (gradient step times red_lambda) the pnp part tunes over (``settings``).
RED_PRIOR_STEPS = (0.03, 0.1)
RADIO = {"num_times": 32, "num_channels": 4}
RADIO_SIGMA, BLANK_SKY_DB, RADIO_TARGET_DB = 0.001, 0.0, 10.0
CLEAN_GAIN, CLEAN_COMPONENTS = 0.1, 100


# One table, its rows printed by every part as their figures come.
TABLE = Table("problem", "method", "algorithm", "budget", "final (dB) / time", "best (dB)",
              "wall s", "best (dB) per denoiser_sigma")
row = TABLE.row


@torch.no_grad()
def time_denoisers(sizes: list[int], repeats: int) -> None:
    for size in sizes:
        smallest = size == min(sizes)
        calls = repeats if smallest else 1
        for channels in (1, 3):
            noisy = random_ellipses(size, channels, 0)
            noisy = noisy + 0.05 * torch.randn(noisy.shape, generator=torch.Generator()
                                               .manual_seed(1))
            for name in ("bm3d", "wavelet", "tv"):
                params = pnp_parameters(denoiser=name, denoiser_sigma=0.05)
                network = make_denoiser(params, (channels, size, size), CPU)
                if smallest:
                    network(noisy, 0.05)  # warm-up: one-time costs, paid once
                seconds = timed(partial(network, noisy, 0.05), calls).median
                row("timing", f"{size}² {'grey' if channels == 1 else 'colour'}", name,
                    f"{calls} call(s)", f"{seconds:.3f} s/call")


@torch.no_grad()
def pnp_run(problem, solver: dict, algorithm: str, denoiser: str, iterations: int,
            metric) -> list[float]:
    params = pnp_parameters(**{**solver, "algorithm": algorithm, "denoiser": denoiser,
                               "pretrained": "auto", "max_iter": iterations})
    network = make_denoiser(params, tuple(problem.x_true.shape[1:]), CPU)
    loop = PnPLoop(problem, network, params, StepProfiler(CPU))
    values = [metric(loop.x, problem.x_true)]
    for _ in range(iterations):
        loop.iterate()
        values.append(metric(loop.x, problem.x_true))
    return values


def loop_values(loop, iterations: int, problem, metric) -> list[float]:
    values = [metric(loop.x, problem.x_true)]
    for _ in range(iterations):
        loop.iterate()
        values.append(metric(loop.x, problem.x_true))
    return values


def settings(algorithm: str, sigmas: list[float], norm_squared: float) -> list[dict]:
    """The settings an algorithm is tuned over: every sigma, and for RED each
    ``RED_PRIOR_STEPS`` as red_lambda = c ||A||^2 (its gradient step 1 / ||A||^2 times
    red_lambda is the prior's own step c; red_lambda 1 on CT 128², ||A||^2 7416, leaves
    the prior a step of 1e-4: RED is then plain gradient descent on the data)."""
    grid = [{"denoiser_sigma": sigma} for sigma in sigmas]
    if algorithm != "red":
        return grid
    return [{**setting, "red_lambda": c * norm_squared}
            for c in RED_PRIOR_STEPS for setting in grid]


def setting_text(setting: dict, norm_squared: float) -> str:
    text = f"sigma {setting['denoiser_sigma']:g}"
    if "red_lambda" in setting:
        text += f", lambda {setting['red_lambda'] / norm_squared:g} ‖A‖²"
    return text


def tuned_run(problem, solver: dict, algorithm: str, denoiser: str, iterations: int,
              grid: list[dict]) -> tuple[int, list[float], list[float]]:
    """The run of ``grid``'s settings whose best PSNR is highest: (its index, its PSNR per
    iteration, every setting's best PSNR)."""
    runs = [pnp_run(problem, {**solver, **setting}, algorithm, denoiser, iterations, psnr)
            for setting in grid]
    bests = [max(values) for values in runs]
    chosen = bests.index(max(bests))
    return chosen, runs[chosen], bests


def sweep_text(grid: list[dict], bests: list[float], norm_squared: float) -> str:
    """Every setting's best PSNR; a best at an end of the sigma grid is marked (the grid may
    cut it)."""
    text = ", ".join(f"{setting_text(setting, norm_squared)}: {value:.2f}"
                     for setting, value in zip(grid, bests, strict=True))
    sigmas = [setting["denoiser_sigma"] for setting in grid]
    chosen = sigmas[bests.index(max(bests))]
    at_end = len(set(sigmas)) > 1 and chosen in (min(sigmas), max(sigmas))
    return text + (" (best at an end of the sigma grid)" if at_end else "")


def compare_pnp(args, targets: list[tuple[str, bool, str]]) -> None:
    datasets, solvers = example_settings("methods.yml")
    solver = solvers["pnp"]
    example_sigma = solver["denoiser_sigma"]
    for key, name, size, iterations in (
            ("ct", "tomography_2d", args.ct_size, args.ct_iterations),
            ("superres", "multiframe_superres", args.sr_size, args.sr_iterations)):
        problem = build_problem(name, **{**datasets[name], "image_size": size})
        label = f"{key} {size}²"
        with Stopwatch() as watch:
            cgls = loop_values(CGLSLoop(problem, StepProfiler(CPU)), iterations, problem, psnr)
        row(label, "cgls", "-", f"{iterations} its", f"{cgls[-1]:.2f}",
            f"{max(cgls):.2f} (it {cgls.index(max(cgls))})", f"{watch.seconds:.1f}")
        norm_squared = estimate_operator_norm(problem).value
        best = {}
        runs = [(a, d, args.sigmas) for d in PRIORS for a in ALGORITHMS] \
            + [(a, "bm3d", args.bm3d_sigmas or [example_sigma]) for a in args.bm3d_algorithms]
        for algorithm, denoiser, sigmas in runs:
            grid = settings(algorithm, sigmas, norm_squared)
            with Stopwatch() as watch:
                chosen, values, bests = tuned_run(problem, solver, algorithm, denoiser,
                                                  iterations, grid)
            best[algorithm, denoiser] = max(values)
            row(label, f"pnp {denoiser}", algorithm,
                f"{iterations} its, {setting_text(grid[chosen], norm_squared)}",
                f"{values[-1]:.2f}", f"{max(values):.2f} (it {values.index(max(values))})",
                f"{watch.seconds:.1f}", sweep_text(grid, bests, norm_squared))
        losers = [f"{d}/{a} {v:.2f}" for (a, d), v in best.items() if v <= max(cgls)]
        targets.append((f"{key}: every PnP run's best PSNR, at its best sigma, above CGLS's "
                        f"best ({max(cgls):.2f} dB)", not losers,
                        "below it: " + ", ".join(losers) if losers else
                        f"lowest PnP best {min(best.values()):.2f} dB"))
        if key == "superres" and args.bm3d_algorithms:
            bm3d = max(best[a, "bm3d"] for a in args.bm3d_algorithms)
            tv = max(best[a, "tv"] for a in args.bm3d_algorithms)
            targets.append((f"superres: best PnP-BM3D above best PnP-TV over "
                            f"{', '.join(args.bm3d_algorithms)}, each at its best sigma",
                            bm3d > tv,
                            f"{bm3d:.2f} dB against {tv:.2f} dB ({bm3d - tv:+.2f} dB)"))


@torch.no_grad()
def run_clean(problem, label: str, iterations: int) -> list[float]:
    """CLEAN's SNR per iteration: its restored image (what the ``clean`` solver's rows
    record) and its components alone (the model, point sources); prints both, returns the
    components'."""
    with Stopwatch() as watch:
        loop = CleanLoop(problem, CLEAN_GAIN, 0.0, CLEAN_COMPONENTS, StepProfiler(CPU))
        restored, model = [snr(loop.x, problem.x_true)], [snr(loop.model[None, None],
                                                              problem.x_true)]
        for _ in range(iterations):
            loop.iterate()
            restored.append(snr(loop.x, problem.x_true))
            model.append(snr(loop.model[None, None], problem.x_true))
    seconds = f"{watch.seconds:.1f}"
    for what, values in (("restored", restored), ("components", model)):
        row(label, f"clean {what}", f"gain {CLEAN_GAIN}, {CLEAN_COMPONENTS}/it",
            f"{iterations} its", f"{values[-1]:.2f}",
            f"{max(values):.2f} (it {values.index(max(values))})", seconds)
    return model


def compare_radio(args, targets: list[tuple[str, bool, str]]) -> None:
    solver = example_settings("methods.yml")[1]["pnp"]
    solver = {**solver, "denoiser_sigma": RADIO_SIGMA, "init": "dirty"}
    for weighting in ("uniform", "natural"):
        problem = build_problem("radio_interferometry", image_size=args.radio_size,
                                weighting=weighting, **RADIO)
        label = f"radio {args.radio_size}² {weighting}"
        clean = run_clean(problem, label, args.radio_iterations)
        final, best = {}, {}
        for denoiser in args.radio_denoisers:
            for algorithm in ALGORITHMS:
                with Stopwatch() as watch:
                    values = pnp_run(problem, solver, algorithm, denoiser,
                                     args.radio_iterations, snr)
                final[algorithm, denoiser], best[algorithm, denoiser] = values[-1], max(values)
                row(label, f"pnp {denoiser}", algorithm, f"{args.radio_iterations} its",
                    f"{values[-1]:.2f}", f"{max(values):.2f} (it {values.index(max(values))})",
                    f"{watch.seconds:.1f}")
        top = max(best, key=best.get)
        if weighting == "uniform":
            targets.append((f"radio uniform: CLEAN's components above {RADIO_TARGET_DB:.0f} "
                            f"dB SNR",
                            max(clean) > RADIO_TARGET_DB, f"best {max(clean):.2f} dB"))
            targets.append((f"radio uniform: best PnP run above {RADIO_TARGET_DB:.0f} dB SNR",
                            best[top] > RADIO_TARGET_DB,
                            f"{top[1]}/{top[0]} {best[top]:.2f} dB"))
        else:
            below = [f"{d}/{a} {v:.2f}" for (a, d), v in final.items() if v <= BLANK_SKY_DB]
            targets.append(("radio natural: every PnP run's final SNR above 0 dB (a blank sky)",
                            not below, "below: " + ", ".join(below) if below else
                            f"lowest {min(final.values()):.2f} dB; best {top[1]}/{top[0]} "
                            f"{best[top]:.2f} dB"))


def main(argv: list[str] | None = None) -> int:
    parser = tool_parser(__doc__, __file__)
    parser.add_argument("--parts", nargs="+", choices=PARTS, default=list(PARTS))
    add_sizes(parser, [256, 1024], "the timing part's image sides")
    add_repeats(parser, 3, "the timing part's calls at the smallest size")
    parser.add_argument("--ct-size", type=int, default=128)
    parser.add_argument("--sr-size", type=int, default=128)
    parser.add_argument("--ct-iterations", type=int, default=100)
    parser.add_argument("--sr-iterations", type=int, default=40)
    parser.add_argument("--sigmas", nargs="+", type=float, default=[0.001, 0.003, 0.01, 0.03])
    parser.add_argument("--bm3d-sigmas", nargs="*", type=float, default=[],
                        help="bm3d's denoiser_sigma grid (none: the methods example's)")
    parser.add_argument("--bm3d-algorithms", nargs="*", choices=list(ALGORITHMS),
                        default=["hqs", "dpir"])
    parser.add_argument("--radio-denoisers", nargs="+", choices=["tv", "wavelet", "bm3d"],
                        default=["tv"])
    parser.add_argument("--radio-size", type=int, default=128)
    parser.add_argument("--radio-iterations", type=int, default=100)
    add_threads(parser)
    args = parser.parse_args(argv)
    apply_threads(args.threads)
    with Stopwatch() as everything:
        targets = run_parts(args)
    print(f"\n{torch.get_num_threads()} torch threads, {everything.seconds:.0f} s "
          f"in all; PSNR on ct and superres, SNR on radio")
    return print_targets(targets)


def run_parts(args) -> list[tuple[str, bool, str]]:
    TABLE.header()
    targets: list[tuple[str, bool, str]] = []
    if "timing" in args.parts:
        time_denoisers(args.sizes, args.repeats)
    if "pnp" in args.parts:
        compare_pnp(args, targets)
    if "radio" in args.parts:
        compare_radio(args, targets)
    elif "clean" in args.parts:  # CLEAN alone, as the radio part runs it
        for weighting in ("uniform", "natural"):
            problem = build_problem("radio_interferometry", image_size=args.radio_size,
                                    weighting=weighting, **RADIO)
            run_clean(problem, f"radio {args.radio_size}² {weighting}", args.radio_iterations)
    return targets


if __name__ == "__main__":
    sys.exit(main())
