"""GPU check: CUDA + NCCL runs through `scalebench run`, in-process checks, figures printed.

Runs, on the first GPU, with each experiment's rows read back:
  ct_1rank        2D CT 512x512 (256 angles, 8 operators), PnP + random DRUNet, 1 rank
  ct_1rank_dist   the same with distribute_physics / distribute_denoiser (4 tiles), 1 rank
  ct_2ranks       the same on 2 ranks sharing the GPU (NCCL; recorded as failed, with its
                  error, where NCCL will not put two ranks on one device)
  sr_1rank        multi-frame super-resolution 1024x1024 RGB, 4 frames, DRUNet, 1 rank
  compile         DnCNN through torch.compile, 1 rank
and checks that the CUDA peak and increase columns are filled and that step times are
positive; reports whether the distributed path on one rank reproduces the plain one's digests
(its denoiser tiles overlap by 32 pixels, less than DRUNet's receptive radius: a difference is
expected) and whether 2 ranks reproduce the distributed path on 1 rank bit for bit. Then,
in this process and by `scalebench replay`:
  step_clock      the profiler's step times (device synchronised) against CUDA events
                  recorded inside the same steps: ratio >= 1 and close to it
  metrics         every metric on the GPU against the same computation on the CPU (relative
                  difference, target <= 1e-6) and the evaluation's CUDA memory over the image
  operators       each dataset's A and A^T under torch.use_deterministic_algorithms (raising):
                  which operators have no deterministic CUDA kernel, and whether two
                  applications are bitwise equal
  replay          a small deterministic CT run on CUDA, then `scalebench replay` of its rows:
                  MATCH expected, bit for bit on the same GPU
Prints one JSON document. `--device cpu` runs the in-process checks on the CPU (no events;
for trying the script where no GPU is lent).

    python -m tools.gpu_check [--iterations 5] [--device cuda|cpu] [--only step_clock,...]
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path

import torch

from tools.measuring import (
    Stopwatch,
    add_device,
    add_iterations,
    median,
    pnp_config,
    private_benchmark,
    run_config,
    run_scalebench,
    tool_parser,
    write_config,
)

CT = {"tomography_2d": {"image_size": 512, "num_angles": 256, "num_operators": 8}}
SR = {"multiframe_superres": {"image_size": 1024, "num_frames": 4}}
# 4 tiles of 256 in batches of 2: two batches to deal, so 2 ranks each have one.
BASE = {"device": "cuda", "denoiser": "drunet", "denoiser_sigma": 0.02, "tile_size": 256,
        "tile_overlap": 32, "tiles_per_batch": 2}
CASES = {
    "ct_1rank": (CT, {**BASE}, 1),
    "ct_1rank_dist": (CT, {**BASE, "distribute_physics": True, "distribute_denoiser": True}, 1),
    "ct_2ranks": (CT, {**BASE, "distribute_physics": True, "distribute_denoiser": True}, 2),
    "sr_1rank": (SR, {**BASE, "tile_size": 0}, 1),
    "compile": (SR, {**BASE, "denoiser": "dncnn", "tile_size": 0, "compile": True}, 1),
}


def run_case(workdir: Path, name: str, iterations: int) -> dict:
    dataset, solver, ranks = CASES[name]
    config = write_config(workdir / f"{name}.yml", pnp_config(dataset, solver, iterations, "1h"))
    launch = run_config(config, workdir / "benchmark_inference", name, ranks)
    wall = launch.finished.wall_s
    if launch.finished.returncode:
        return {"status": "failed", "wall_s": round(wall, 1),
                "error": launch.finished.error_lines(3)}
    df = launch.rows()
    rows = df[df.stop_val > 1].sort_values("stop_val")
    figures = {"status": "ok", "wall_s": round(wall, 1), "world_size": int(
        df.prov_world_size.iloc[0]), "gpu": df.prov_gpu_models.iloc[0],
        "driver": df.prov_gpu_driver.iloc[0], "nccl": df.prov_nccl.iloc[0],
        "psnr_last_db": round(float(df.sort_values("stop_val").objective_psnr_db.iloc[-1]), 4),
        "digests": df.sort_values("stop_val").prov_result_sha256.tolist()}
    for column in ("grad_time_s_max", "denoise_time_s_max", "comm_time_s_max",
                   "grad_peak_cuda_alloc_mib_max", "denoise_peak_cuda_alloc_mib_max",
                   "grad_cuda_alloc_increase_mib_max", "denoise_cuda_alloc_increase_mib_max",
                   "comm_bytes"):
        values = rows[f"objective_{column}"]
        figures[column] = round(float(median(values)), 5)
    figures["cuda_columns_filled"] = bool(all(
        (rows[f"objective_{step}_{kind}"] > 0).all() for step in ("grad", "denoise")
        for kind in ("peak_cuda_alloc_mib", "cuda_alloc_increase_mib")))
    figures["step_times_positive"] = bool(all(
        (rows[f"objective_{step}_time_s_max"] > 0).all() for step in ("grad", "denoise")))
    figures["host_memory_method"] = str(rows.objective_host_memory_method.iloc[0])
    figures["setup_time_s"] = round(float(rows.objective_setup_time_s.iloc[0]), 3)
    figures["compile_time_s"] = round(float(rows.objective_compile_time_s.iloc[0]), 3)
    return figures


def step_clock(device: torch.device, iterations: int) -> dict:
    """Profiler step times against CUDA events recorded inside the same steps."""
    from scalebench.denoisers.build import make_denoiser
    from scalebench.loops.inference_parameters import PNP_PARAMS
    from scalebench.param_spec import resolved_parameters
    from scalebench.problems import build_problem
    from scalebench.rank.profiling import StepProfiler

    problem = build_problem("tomography_2d", image_size=256, num_angles=128).to(device)
    params = resolved_parameters({**BASE, "device": device.type, "tile_size": 128},
                                 PNP_PARAMS)
    denoiser = make_denoiser(params, tuple(problem.x_true.shape[1:]), device)
    profiler, physics, x = StepProfiler(device), problem.physics, problem.x_true.clone()
    ratios: dict[str, list[float]] = {"grad": [], "denoise": []}
    with torch.no_grad():
        for _ in range(iterations):
            for step in ratios:
                events = [torch.cuda.Event(enable_timing=True) for _ in range(2)] \
                    if device.type == "cuda" else []
                with profiler.step(step):
                    if events:
                        events[0].record()
                    x = x - 1e-3 * physics.A_adjoint(physics.A(x) - problem.y) \
                        if step == "grad" else denoiser(x, 0.02)
                    if events:
                        events[1].record()
                if events:
                    events[1].synchronize()
                    event_s = events[0].elapsed_time(events[1]) / 1000
                    ratios[step].append(profiler.last[f"{step}_time_s"] / event_s)
    if device.type != "cuda":
        return {"status": "skipped: CUDA events need a GPU",
                "profiler_step_s": {k: profiler.last[f"{k}_time_s"] for k in ratios}}
    medians = {step: round(median(values), 4) for step, values in ratios.items()}
    return {"status": "ok", "profiler_over_events_median": medians,
            "synchronised": all(1.0 <= min(v) for v in ratios.values()),
            "cuda_increase_columns": sorted(k for k in profiler.last if "increase" in k)}


def metrics_on_device(device: torch.device) -> dict:
    """Metrics on ``device`` against the CPU computation, and the evaluation's memory."""
    from scalebench.rank.metrics import quality_metrics

    generator = torch.Generator().manual_seed(0)
    x = torch.rand(1, 3, 2048, 2048, generator=generator)
    x_hat = x + 0.05 * torch.randn(x.shape, generator=generator)
    reference = quality_metrics(x_hat, x)
    x_dev, x_hat_dev = x.to(device), x_hat.to(device)
    if device.type == "cuda":
        torch.cuda.synchronize(device)
        torch.cuda.reset_peak_memory_stats(device)
        allocated = torch.cuda.memory_allocated(device)
    with Stopwatch(device) as watch:
        on_device = quality_metrics(x_hat_dev, x_dev)
    seconds = watch.seconds
    differences = {k: abs(on_device[k] - v) / abs(v) for k, v in reference.items()
                   if k != "diverged"}
    figures = {"max_relative_difference": max(differences.values()),
               "within_1e-6": max(differences.values()) <= 1e-6,
               "evaluation_s": round(seconds, 4)}
    if device.type == "cuda":
        extra = torch.cuda.max_memory_allocated(device) - allocated
        figures["cuda_extra_over_image"] = round(extra / (x.numel() * 4), 3)
    return figures


def operator_determinism(device: torch.device, size: int = 128) -> dict:
    """Per dataset (and per CT projector): does A / A^T run under deterministic algorithms,
    and repeat bitwise? The Walnut problem is checked when its data is in the cache."""
    from scalebench.errors import ScalebenchError
    from scalebench.problems import PROBLEMS, build_problem

    small = {"tomography_2d": {"image_size": size, "num_angles": size // 2},
             "multiframe_superres": {"image_size": size}, "synthetic": {"image_size": size},
             "radio_interferometry": {"image_size": size, "num_times": 4, "num_channels": 1},
             "walnut_conebeam": {"num_projections": 8, "projector": "torch"}}
    cases = {f"tomography_2d[{p}]": ("tomography_2d", {"projector": p})
             for p in ("torch", "astra", "deepinv")}
    cases.update({name: (name, {}) for name in PROBLEMS if name != "tomography_2d"})
    findings = {}
    previous = torch.are_deterministic_algorithms_enabled()
    torch.use_deterministic_algorithms(True)
    try:
        for label, (name, extra) in sorted(cases.items()):
            try:
                problem = build_problem(name, **small.get(name, {}), **extra).to(device)
            except ScalebenchError as error:  # data not fetched, library not installed
                findings[label] = {"skipped": str(error)}
                continue
            findings[label] = _apply_twice(problem)
    finally:
        torch.use_deterministic_algorithms(previous)
    return findings


def _apply_twice(problem) -> dict:
    physics, result = problem.physics, {}
    for label, apply in (("A", lambda: physics.A(problem.x_true)),
                         ("A_adjoint", lambda: physics.A_adjoint(problem.y))):
        try:
            with torch.no_grad():
                first, second = apply(), apply()
        except RuntimeError as error:
            result[label] = "no deterministic kernel: " + str(error).splitlines()[0][:160]
            continue
        same = all(torch.equal(a, b) for a, b in zip(_parts(first), _parts(second),
                                                      strict=True))
        result[label] = "bitwise repeatable" if same else "runs, but differs between calls"
    return result


def _parts(value) -> list[torch.Tensor]:
    return list(value) if not isinstance(value, torch.Tensor) else [value]


def deterministic_replay(workdir: Path, device: torch.device) -> dict:
    """A small deterministic CT run on the device, then `scalebench replay` of its rows."""
    config = write_config(workdir / "replay_source.yml", {
        "dataset": [{"tomography_2d": {"image_size": 128, "num_angles": 64,
                                       "num_operators": 2}}],
        "solver": [{"pnp": {"device": device.type, "denoiser": "drunet", "max_iter": 3,
                            "denoiser_sigma": 0.02, "deterministic": True}}],
        "max-runs": 10, "timeout": "1h"})
    benchmark = workdir / "benchmark_inference"
    launch = run_config(config, benchmark, "replay_source")
    if launch.finished.returncode:
        return {"status": "run failed", "error": launch.finished.error_lines(3)}
    replayed = run_scalebench("replay", launch.results, "--benchmark", benchmark)
    lines = [line for line in replayed.stdout.splitlines()
             if line.startswith(("MATCH", "DIFFER", "REFUSED", "TAMPERED"))]
    return {"status": "ok", "match": replayed.returncode == 0, "verdicts": lines,
            "stderr_tail": replayed.error_lines(3)}


CHECKS = ("runs", "step_clock", "metrics", "operators", "replay")


def main(argv: list[str] | None = None) -> None:
    parser = tool_parser(__doc__, __file__)
    add_iterations(parser, 5, "PnP iterations of each run, and steps of the step clock")
    add_device(parser, "cuda")
    parser.add_argument("--only", default=",".join(CHECKS),
                        help=f"comma-separated checks among {', '.join(CHECKS)}")
    args = parser.parse_args(argv)
    device, only = torch.device(args.device), args.only.split(",")
    report: dict = {}
    with tempfile.TemporaryDirectory() as folder:
        workdir = Path(folder)
        private_benchmark(workdir)
        if "runs" in only:
            for name in CASES:
                report[name] = run_case(workdir, name, args.iterations)
                print(f"{name}: {report[name]['status']} in {report[name]['wall_s']} s",
                      file=sys.stderr, flush=True)
            _compare_ranks(report)
        for name, check in (("step_clock", lambda: step_clock(device, args.iterations)),
                            ("metrics", lambda: metrics_on_device(device)),
                            ("operators", lambda: operator_determinism(device)),
                            ("replay", lambda: deterministic_replay(workdir, device))):
            if name in only:
                with Stopwatch() as watch:
                    report[name] = check()
                print(f"{name}: done in {watch.seconds:.1f} s", file=sys.stderr, flush=True)
    print(json.dumps(report, indent=1, default=str))


def _compare_ranks(report: dict) -> None:
    plain, one, two = report["ct_1rank"], report["ct_1rank_dist"], report["ct_2ranks"]
    if plain["status"] == one["status"] == "ok":
        report["one_rank_distributed_matches_plain_bitwise"] = \
            plain["digests"] == one["digests"]
    if one["status"] == two["status"] == "ok":
        report["two_ranks_match_one_rank_bitwise"] = one["digests"] == two["digests"]
        report["psnr_difference_db"] = abs(one["psnr_last_db"] - two["psnr_last_db"])
    for figures in report.values():
        if isinstance(figures, dict):
            figures.pop("digests", None)


if __name__ == "__main__":
    main()
