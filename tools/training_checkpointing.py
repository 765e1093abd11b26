"""Activation checkpointing of a training step: memory saved and time paid, measured.

For every patch size and number of stages K, trains the unrolled network (DnCNN prior,
denoising of generated images) for a few steps with no checkpointing, one stage at a time
and one tile batch at a time, each in a fresh process (so that memory freed by an earlier
configuration cannot hide a later one's peak). Prints, per configuration, the median step
time, the step's peak memory above what the process held before it (host resident set, or
the CUDA allocator's on a GPU), the activations the graph kept for the backward pass, and
the ratios against no checkpointing: memory saved = peak increase(none) / peak
increase(mode), time paid = step time(mode) / step time(none), also in process CPU seconds
(steadier than wall time on a shared machine).

    python -m tools.training_checkpointing [--patch-sizes 64 128] [--stages 2 4]
        [--device cpu|cuda] [--steps 3] [--width 32] [--depth 6] [--batch-size 2]
"""

from __future__ import annotations

import json
import time

from tools.measuring import (
    ChildFailed,
    Table,
    add_child,
    add_device,
    child_figures,
    median,
    print_figures,
    tool_parser,
)

MODES = ("none", "stage", "tile_batch")


def measure(config: dict) -> dict:
    """Run in a child: train ``config`` for its steps; the median time and worst memory."""
    import torch

    from scalebench.benchmarks import TRAINING
    from scalebench.loops.training.parameters import TRAINING_PARAMS
    from scalebench.loops.training.patches import TrainingData
    from scalebench.loops.training.step import Trainer, build_model, set_checkpointing
    from scalebench.param_spec import resolved_parameters
    from scalebench.rank.context import run_context
    from scalebench.rank.determinism import apply_determinism
    from scalebench.rank.profiling import StepProfiler

    params = resolved_parameters(config["solver"], TRAINING_PARAMS)
    apply_determinism(True, 0)
    context = run_context(torch.device(params["device"]))
    setup = TRAINING.setup_problem("synthetic", **config["dataset"])
    data = TrainingData(setup, TRAINING.problems["synthetic"], params["patch_size"], 0,
                        context.device)
    model = build_model(params, data, context)
    set_checkpointing(model, params["checkpointing"])
    training = Trainer(model, data, params, context, StepProfiler(context.device,
                                                                   context=context))
    memory = "cuda_alloc_mib" if context.device.type == "cuda" else "host_rss_mib"
    times, cpu_times, increases, saved = [], [], [], 0.0
    for _ in range(config["steps"]):
        start = time.process_time()
        training.iterate()
        cpu_times.append(time.process_time() - start)
        figures = training.figures()
        times.append(figures["step_time_s"])
        increases.append(figures[f"step_peak_increase_{memory}"])
        saved = figures["saved_activations_mib"]
    return {"time_s": median(times), "cpu_s": median(cpu_times),
            "peak_increase_mib": max(increases),
            "saved_mib": saved, "memory": memory}


def run_child(config: dict) -> dict:
    try:
        return child_figures(__spec__.name, json.dumps(config))
    except ChildFailed as error:
        raise SystemExit(f"measurement failed: {error}") from None


def main(argv: list[str] | None = None) -> None:
    parser = tool_parser(__doc__, __file__)
    parser.add_argument("--patch-sizes", type=int, nargs="+", default=[64, 128])
    parser.add_argument("--stages", type=int, nargs="+", default=[2, 4])
    add_device(parser)
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--width", type=int, default=32)
    parser.add_argument("--depth", type=int, default=6)
    parser.add_argument("--batch-size", type=int, default=2)
    add_child(parser)
    args = parser.parse_args(argv)
    if args.child:
        print_figures(measure(json.loads(args.child[0])))
        return
    table = Table("patch", "K", "mode", "step s", "cpu s", "peak+ MiB", "kept MiB",
                  "mem saved", "time paid", "cpu paid")
    table.header()
    for patch in args.patch_sizes:
        for stages in args.stages:
            results = {}
            for mode in MODES:
                solver = {"num_stages": stages, "denoiser_width": args.width,
                          "denoiser_depth": args.depth, "patch_size": patch,
                          "batch_size": args.batch_size, "tile_size": patch // 2,
                          "tile_overlap": 8, "tiles_per_batch": 1, "checkpointing": mode,
                          "device": args.device}
                results[mode] = run_child({"dataset": {"image_size": patch,
                                                       "task": "denoising"},
                                           "solver": solver, "steps": args.steps})
                base, mine = results["none"], results[mode]
                saved = base["peak_increase_mib"] / max(mine["peak_increase_mib"], 1e-9)
                paid = mine["time_s"] / base["time_s"]
                cpu_paid = mine["cpu_s"] / base["cpu_s"]
                table.row(patch, stages, mode, f"{mine['time_s']:.3f}", f"{mine['cpu_s']:.3f}",
                          f"{mine['peak_increase_mib']:.1f}", f"{mine['saved_mib']:.1f}",
                          f"{saved:.2f}x", f"{paid:.2f}x", f"{cpu_paid:.2f}x")
    print(f"peak+ = the step's peak {results['none']['memory']} above the memory held before "
          f"it; kept = activations saved for the backward pass; memory saved = "
          f"peak+(none) / peak+(mode); time paid = step time(mode) / step time(none); "
          f"cpu = process CPU seconds of a step (all threads; steadier than wall time on a "
          f"shared machine)")


if __name__ == "__main__":
    main()
