"""PSNR gains of PnP and of the standalone denoiser with bundled, TV and random denoisers, on
the shipped examples' problems at their sizes.

    python -m tools.bundled_gains [--random-iterations 3] [--only CASE ...] [--denoisers NAME ...]

Each case takes its dataset and solver parameters from a shipped example (configs/examples/;
the first value of a list), swaps the denoiser and ``pretrained``, runs the example's
``max_iter`` iterations and prints the PSNR of the initial estimate (PnP: the example's
``init``; the standalone denoiser: the noisy image), the final PSNR and the gain. Cases:
tomography_2d.yml, the PnP and the denoiser solvers of multiframe_superres.yml, and
synthetic.yml's first size with ``task: denoising``. Random weights are deepinv's full
networks: they run ``--random-iterations`` iterations only (the full DRUNet takes tens of
seconds per iteration here), which is enough to show what they do to an image.
"""

from __future__ import annotations

import sys

import torch

from scalebench.denoisers.build import make_denoiser
from scalebench.loops import SOLVERS
from scalebench.loops.denoising import noisy_copy
from scalebench.loops.pnp import PnPLoop
from scalebench.param_spec import resolved_parameters
from scalebench.problems import build_problem
from scalebench.rank.metrics import psnr
from scalebench.rank.profiling import StepProfiler
from tools.measuring import Stopwatch, Table, example_settings, tool_parser

CPU = torch.device("cpu")
# (label, example file, solver of the example, dataset and solver overrides). Synthetic
# denoising: the example's noise_level 0.05 is relative to the image's RMS, about 0.025
# absolute, the denoiser's sigma here.
CASES = (
    ("tomography", "tomography_2d.yml", "pnp", {}, {}),
    ("super-resolution", "multiframe_superres.yml", "pnp", {}, {}),
    ("synthetic denoising", "synthetic.yml", "pnp", {"task": "denoising"},
     {"denoiser_sigma": 0.025}),
    ("standalone denoiser", "multiframe_superres.yml", "denoiser", {}, {}),
)
DENOISERS = {"tv": ("tv", "auto"), "drunet": ("drunet", "bundled"),
             "dncnn": ("dncnn", "bundled"), "drunet-random": ("drunet", "none"),
             "dncnn-random": ("dncnn", "none")}


def example(file: str, solver: str) -> tuple[str, dict, dict]:
    """The example's first dataset, its parameters and ``solver``'s."""
    datasets, solvers = example_settings(file)
    dataset = next(iter(datasets))
    return dataset, datasets[dataset], solvers[solver]


@torch.no_grad()
def run_case(file: str, solver: str, overrides: dict, solver_overrides: dict, denoiser: str,
             pretrained: str, random_iterations: int) -> tuple[float, float, int, float]:
    """(initial PSNR, final PSNR, iterations, seconds) of one case with one denoiser."""
    dataset, dataset_values, solver_values = example(file, solver)
    problem = build_problem(dataset, **{**dataset_values, **overrides})
    params = resolved_parameters({**solver_values, **solver_overrides, "denoiser": denoiser,
                                  "pretrained": pretrained, "device": "cpu"},
                                 SOLVERS[solver].params)
    shape = tuple(problem.x_true.shape[1:])
    network = make_denoiser(params, shape, CPU)
    iterations = params["max_iter"] if pretrained != "none" else min(random_iterations,
                                                                      params["max_iter"])
    if solver == "denoiser":
        with Stopwatch() as watch:
            noisy = noisy_copy(problem.x_true, params["denoiser_sigma"], params["seed"])
            result = network(noisy, params["denoiser_sigma"])
        return psnr(noisy, problem.x_true), psnr(result, problem.x_true), 1, watch.seconds
    with Stopwatch() as watch:
        loop = PnPLoop(problem, network, params, StepProfiler(CPU))
        initial = psnr(loop.x, problem.x_true)
        for _ in range(iterations):
            loop.iterate()
    return initial, psnr(loop.x, problem.x_true), iterations, watch.seconds


def main(argv: list[str] | None = None) -> int:
    parser = tool_parser(__doc__, __file__)
    parser.add_argument("--random-iterations", type=int, default=3)
    parser.add_argument("--only", nargs="+", choices=[c[0] for c in CASES],
                        default=[c[0] for c in CASES])
    parser.add_argument("--denoisers", nargs="+", choices=list(DENOISERS),
                        default=list(DENOISERS))
    args = parser.parse_args(argv)
    table = Table("case", "denoiser", "weights", "iterations", "initial PSNR (dB)",
                  "final PSNR (dB)", "gain (dB)", "seconds")
    table.header()
    for label, file, solver, overrides, solver_overrides in CASES:
        if label not in args.only:
            continue
        for denoiser, pretrained in (DENOISERS[d] for d in args.denoisers):
            weights = "-" if denoiser == "tv" else \
                "random" if pretrained == "none" else pretrained
            initial, final, iterations, seconds = run_case(
                file, solver, overrides, solver_overrides, denoiser, pretrained,
                args.random_iterations)
            table.row(label, denoiser, weights, iterations, f"{initial:.2f}", f"{final:.2f}",
                      f"{final - initial:+.2f}", f"{seconds:.0f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
