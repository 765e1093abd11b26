"""Every PnP algorithm x denoiser on the methods example's problems: quality, cost per step
and time to a common target, side by side in one run.

    python -m tools.methods_comparison [--iterations 100] [--reference-iterations 300]
        [--problems ct superres] [--denoisers tv drunet] [--algorithms pgd fista ...]

The problems and the solver settings are configs/examples/methods.yml's (its first value of
each list), sizes overridable (``--ct-size``, ``--sr-size``). Each run is the ``pnp`` loop
in this process (scalebench.loops.pnp.PnPLoop, the same code a rank runs), evaluated every
iteration. Printed per run: the final and best PSNR, seconds per iteration split into grad /
prox / denoise (mean over iterations), the conjugate-gradient iterations of the data prox
(first call, then the largest after the third iteration: bounded when the warm start works)
and, per problem and denoiser, the iterations and solver seconds (set-up apart) each run
needs to come within 0.5 dB of PnP-PGD's own best over ``--reference-iterations``; then the
fastest method's speed-up over PGD to that target. Last, per problem, DPIR with its own
short schedule (``--dpir-iterations``, 8 as in its paper) against PnP-PGD with TV after
``--iterations``: the PSNR each reaches.
"""

from __future__ import annotations

import sys

import torch

from scalebench.denoisers.build import make_denoiser
from scalebench.loops.algorithms import ALGORITHMS
from scalebench.loops.inference_parameters import pnp_parameters
from scalebench.loops.pnp import PnPLoop
from scalebench.problems import build_problem
from scalebench.rank.metrics import psnr
from scalebench.rank.profiling import StepProfiler
from scalebench.results.report.methods import first_at_or_above
from tools.measuring import (
    Stopwatch,
    Table,
    add_iterations,
    add_threads,
    apply_threads,
    example_settings,
    tool_parser,
)

CPU = torch.device("cpu")
TARGET_MARGIN_DB = 0.5
PROBLEMS = {"ct": ("tomography_2d", "ct_size"), "superres": ("multiframe_superres", "sr_size")}
WEIGHTS = {"tv": "auto", "drunet": "bundled", "dncnn": "bundled"}


@torch.no_grad()
def run(problem, solver: dict, algorithm: str, denoiser: str, iterations: int) -> dict:
    """The run's PSNR, cumulative solver seconds and step figures per iteration."""
    params = pnp_parameters(**{**solver, "algorithm": algorithm, "denoiser": denoiser,
                               "pretrained": WEIGHTS[denoiser], "max_iter": iterations})
    network = make_denoiser(params, tuple(problem.x_true.shape[1:]), CPU)
    profiler = StepProfiler(CPU)
    loop = PnPLoop(problem, network, params, profiler)
    quality, elapsed, steps, cg = [psnr(loop.x, problem.x_true)], [0.0], [], []
    with profiler:
        for _ in range(iterations):
            with Stopwatch() as watch:
                loop.iterate()
            elapsed.append(elapsed[-1] + watch.seconds)
            quality.append(psnr(loop.x, problem.x_true))
            last = profiler.last
            steps.append({s: last.get(f"{s}_time_s", 0.0) for s in ("grad", "prox", "denoise")})
            cg.append(int(last.get("prox_cg_iterations", 0)))
            for key in [k for k in last if k.startswith(("grad_", "prox_"))]:
                del last[key]  # an algorithm without the step must not show the last one's
    return {"psnr": quality, "seconds": elapsed, "steps": steps, "cg": cg}


def reached(result: dict, target: float) -> tuple[int, float] | None:
    """The first iteration (and its solver seconds) whose PSNR is at least ``target``."""
    iteration = first_at_or_above(result["psnr"], target)
    return None if iteration is None else (iteration, result["seconds"][iteration])


def main(argv: list[str] | None = None) -> int:
    parser = tool_parser(__doc__, __file__)
    add_iterations(parser, 100, "iterations of each algorithm but PGD")
    parser.add_argument("--reference-iterations", type=int, default=300)
    parser.add_argument("--problems", nargs="+", choices=list(PROBLEMS), default=list(PROBLEMS))
    parser.add_argument("--denoisers", nargs="+", choices=list(WEIGHTS), default=["tv", "drunet"])
    parser.add_argument("--algorithms", nargs="+", choices=list(ALGORITHMS),
                        default=list(ALGORITHMS))
    parser.add_argument("--dpir-iterations", type=int, default=8)
    parser.add_argument("--ct-size", type=int)
    parser.add_argument("--sr-size", type=int)
    add_threads(parser)
    args = parser.parse_args(argv)
    apply_threads(args.threads)
    datasets, solvers = example_settings("methods.yml")
    solver = solvers["pnp"]
    table = Table("problem", "denoiser", "algorithm", "iterations", "final PSNR (dB)",
                  "best PSNR (dB)", "grad s/it", "prox s/it", "denoise s/it",
                  "CG its (first, max after 3)", "to PGD best - 0.5 dB: its", "s")
    table.header()
    for key in args.problems:
        name, size_option = PROBLEMS[key]
        values = dict(datasets[name])
        if getattr(args, size_option):
            values["image_size"] = getattr(args, size_option)
        problem = build_problem(name, **values)
        pgd_tv = None
        for denoiser in args.denoisers:
            results = {a: run(problem, solver, a, denoiser,
                              args.reference_iterations if a == "pgd" else args.iterations)
                       for a in args.algorithms}
            target = max(results["pgd"]["psnr"]) - TARGET_MARGIN_DB \
                if "pgd" in results else None
            times = {}
            for algorithm, result in results.items():
                n = len(result["steps"])
                mean = {s: sum(r[s] for r in result["steps"]) / n for s in ("grad", "prox",
                                                                          "denoise")}
                cg = result["cg"]
                cg_text = f"{cg[0]}, {max(cg[3:], default=0)}" if any(cg) else "-"
                hit = reached(result, target) if target is not None else None
                if hit:
                    times[algorithm] = hit[1]
                table.row(f"{key} {problem.x_true.shape[-1]}²", denoiser, algorithm, n,
                          f"{result['psnr'][-1]:.2f}", f"{max(result['psnr']):.2f}",
                          f"{mean['grad']:.4f}", f"{mean['prox']:.4f}", f"{mean['denoise']:.4f}",
                          cg_text, *((hit[0], f"{hit[1]:.2f}") if hit else ("not reached", "-")))
            if "pgd" in times:
                fastest = min(times, key=times.get)
                table.row(key, denoiser, f"fastest to target: {fastest}", *[""] * 7,
                          f"PGD / fastest: {times['pgd'] / times[fastest]:.1f}x")
            if denoiser == "tv" and "pgd" in results:
                pgd_tv = results["pgd"]["psnr"][min(args.iterations,
                                                    len(results["pgd"]["psnr"]) - 1)]
        if pgd_tv is not None and args.dpir_iterations:
            short_schedule(table, problem, solver, args, key, pgd_tv)
    return 0


def short_schedule(table: Table, problem, solver: dict, args, key: str, pgd_tv: float) -> None:
    """DPIR over ``--dpir-iterations`` with each denoiser against PGD-TV after
    ``--iterations``."""
    for denoiser in args.denoisers:
        dpir = run(problem, solver, "dpir", denoiser, args.dpir_iterations)
        final = dpir["psnr"][-1]
        verdict = "reaches it" if final >= pgd_tv else f"misses by {pgd_tv - final:.2f} dB"
        table.row(key, denoiser, f"dpir, {args.dpir_iterations} iterations",
                  args.dpir_iterations, f"{final:.2f}", f"{max(dpir['psnr']):.2f}", *[""] * 4,
                  f"PGD-TV at {args.iterations}: {pgd_tv:.2f} dB: {verdict}",
                  f"{dpir['seconds'][-1]:.2f}")


if __name__ == "__main__":
    sys.exit(main())
