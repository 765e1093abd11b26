"""Cost of evaluating one result row against one iteration, from 256^2 up to 8192^2.

For each size, on the synthetic ellipse image (denoising task), measured side by side in one
process: one iteration of the standalone denoiser loop with TV (the cheapest denoiser the
benchmark ships, so the hardest case for the ratio) and one row's evaluation exactly as the
objective does it (every quality metric on the estimate's device, then the estimate's digest).
Prints per size: the iteration's and the evaluation's median time over REPEATS, their ratio
(target < 0.10), the evaluation's extra peak memory (host resident set, VmHWM reset before it;
on CUDA also the allocator's peak over what was allocated) and its ratio to the image's size
(target < 2). Sizes whose estimated need exceeds --max-gib are skipped, and the script says
so: TV holds about 12 image-sized arrays.

    python -m tools.evaluation_cost [--sizes 256,512,...,8192] [--repeats 3] [--device auto]
                                    [--max-gib 6]
"""

from __future__ import annotations

import torch

from tools.measuring import (
    Stopwatch,
    Table,
    add_device,
    add_repeats,
    add_sizes,
    median,
    synchronise,
    tool_parser,
)

TARGET_TIME_RATIO = 0.10
TARGET_MEMORY_RATIO = 2.0
ARRAYS_HELD = 16  # image, noisy copy, TV's state and scratch, estimate: what one size needs


def evaluate_row(x_hat: torch.Tensor, x_true: torch.Tensor) -> None:
    """What the objective computes for one row (benchmark_inference/objective.py)."""
    from provenance import array_digest
    from scalebench.rank.metrics import quality_metrics

    quality_metrics(x_hat, x_true)
    array_digest(x_hat)


def measure(size: int, device: torch.device, repeats: int) -> dict:
    from scalebench.denoisers.build import make_denoiser
    from scalebench.loops.denoising import DenoisingLoop
    from scalebench.loops.inference_parameters import DENOISING_PARAMS
    from scalebench.param_spec import resolved_parameters
    from scalebench.problems import setup_problem
    from scalebench.rank.profiling import HostPeakMemory, StepProfiler

    x_true = setup_problem("synthetic", image_size=size, task="denoising").x_true.to(device)
    params = resolved_parameters({"denoiser": "tv", "denoiser_sigma": 0.05}, DENOISING_PARAMS)
    profiler = StepProfiler(device)
    loop = DenoisingLoop(x_true, make_denoiser(params, tuple(x_true.shape[1:]), device), 0.05,
                         0, profiler)
    host = HostPeakMemory()
    iterations, evaluations, host_extra, cuda_extra = [], [], [], []

    def evaluate(x_hat: torch.Tensor) -> None:
        synchronise(device)  # the iteration's queued work done before the peaks reset
        host.reset()
        before = host.current_mib()
        if device.type == "cuda":
            torch.cuda.reset_peak_memory_stats(device)
            allocated = torch.cuda.memory_allocated(device)
        with Stopwatch(device) as watch:
            evaluate_row(x_hat, x_true)
        evaluations.append(watch.seconds)
        host_extra.append(host.read_mib() - before)
        if device.type == "cuda":
            cuda_extra.append((torch.cuda.max_memory_allocated(device) - allocated) / 2**20)

    # First before any iteration: no memory freed by the denoiser is there to be reused, so
    # the growth of the resident set is the evaluation's own need.
    evaluate(loop.noisy)
    for _ in range(repeats):
        loop.iterate()
        iterations.append(profiler.last["denoise_time_s"])
        evaluate(loop.x)
    image_mib = x_true.numel() * x_true.element_size() / 2**20
    figures = {"size": size, "image_mib": image_mib,
               "iteration_s": median(iterations),
               "evaluation_s": median(evaluations),
               "host_extra_mib": max(host_extra), "host_method": host.method}
    if cuda_extra:
        figures["cuda_extra_mib"] = max(cuda_extra)
    return figures


def main(argv: list[str] | None = None) -> None:
    parser = tool_parser(__doc__, __file__)
    add_sizes(parser, [256, 512, 1024, 2048, 4096, 8192])
    add_repeats(parser, 3, "iterations and evaluations per size")
    add_device(parser, "auto", ("auto", "cpu", "cuda"))
    parser.add_argument("--max-gib", type=float, default=6.0,
                        help="skip sizes whose estimated memory need exceeds this")
    args = parser.parse_args(argv)
    from scalebench.rank.context import resolve_device
    from scalebench.rank.metrics import quality_metrics
    from scalebench.rank.names import HOST_PEAK_SINCE_RESET

    device = resolve_device(args.device)
    warm = torch.rand(1, 1, 64, 64, device=device)
    quality_metrics(warm, warm)  # one-time library set-up, not a per-row cost
    print(f"device {device}; targets: evaluation < {TARGET_TIME_RATIO:.0%} of an iteration, "
          f"extra memory < {TARGET_MEMORY_RATIO:g}x the image")
    cuda = ("cuda extra MiB", "x image (cuda)") if device.type == "cuda" else ()
    table = Table("size", "image MiB", "iter s", "eval s", "eval/iter", "host extra MiB",
                  "x image", *cuda, "host peak")
    table.header()
    for size in args.sizes:
        need_gib = ARRAYS_HELD * size * size * 4 / 2**30
        if need_gib > args.max_gib:
            table.row(size, f"skipped: needs about {need_gib:.1f} GiB, over --max-gib "
                      f"{args.max_gib:g}; the largest size measured is the one above")
            break
        f = measure(size, device, args.repeats)
        # Times to 3 significant digits: a small image's evaluation takes well under 1 ms.
        cells = [size, f"{f['image_mib']:.1f}", f"{f['iteration_s']:.3g}",
                 f"{f['evaluation_s']:.3g}", f"{f['evaluation_s'] / f['iteration_s']:.3f}",
                 f"{f['host_extra_mib']:.1f}", f"{f['host_extra_mib'] / f['image_mib']:.2f}"]
        if "cuda_extra_mib" in f:
            cells += [f"{f['cuda_extra_mib']:.1f}", f"{f['cuda_extra_mib'] / f['image_mib']:.2f}"]
        table.row(*cells, "since reset" if f["host_method"] == HOST_PEAK_SINCE_RESET else
                  f"{f['host_method']}, an upper bound")


if __name__ == "__main__":
    main()
