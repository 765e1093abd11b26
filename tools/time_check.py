"""How long, checked against measurements: ``scalebench capacity``'s time model at its answers,
and ``scalebench plan``'s predicted total against a measured campaign.

Answers (``--only`` among tools.capacity_check's cases: ct_astra, superres, radio): each
calibrated in a fresh cache and refined near the answer of its ``--budget`` as the command does,
the calibration's wall time printed; then at the memory answer and at one size in between (the
geometric mean in unknowns of the first calibration's largest probe and the answer), a whole
run (probe.run_probe, as ``--verify`` runs it) measures the seconds per iteration and the
set-up, printed beside the time model's predictions and their ratios. Targets: per iteration
within 0.8-1.25, set-up within 0.7-1.4. ``--record PATH``: the cases' probes and measured
runs written as a time record (scalebench.planning.capacity.time_record), with the commit,
the load average and the machine; tests/unit/test_time_record.py refits the committed one
(tests/fixtures/time_record.json).

Campaign (``--campaign``): the CT half of configs/examples/methods.yml with TV (its seven PnP
algorithms, CGLS and both FBP filters: 10 experiments) at ``--campaign-size``, calibrated
by ``scalebench capacity --quick`` in a fresh cache, planned by ``scalebench plan`` (its
predicted total) and run whole by ``scalebench run`` (its wall time). Target: predicted /
measured within 0.75-1.25.

    python -m tools.time_check [--only NAME ...] [--budget 1.5GiB] [--campaign]
        [--campaign-size 256] [--iterations 40] [--no-answers] [--record PATH]
"""

from __future__ import annotations

import math
import os
import platform
import subprocess
import sys
import tempfile
from datetime import date
from pathlib import Path

import yaml

from tools.capacity_check import CASES, timed_probes
from tools.measuring import (
    Stopwatch,
    Table,
    load_text,
    print_targets,
    private_benchmark,
    run_config,
    run_scalebench,
    tool_parser,
    write_config,
)

ITERATION_RANGE, SETUP_RANGE, CAMPAIGN_RANGE = (0.8, 1.25), (0.7, 1.4), (0.75, 1.25)
ANSWER_CASES = ("ct_astra", "superres", "radio")


def between(configuration, low: int, high: int) -> int:
    """The valid size whose unknowns are nearest the geometric mean of ``low``'s and
    ``high``'s."""
    from scalebench.planning.capacity.configuration import valid_at_most
    from scalebench.planning.capacity.refine import size_with_unknowns, unknowns

    target = math.sqrt(unknowns(configuration, low) * unknowns(configuration, high))
    size = size_with_unknowns(configuration, target, high)
    return size if size is not None else valid_at_most(configuration, (low + high) // 2)


def check_answers(names: list[str], budget_text: str | None) -> tuple[list, list, list]:
    """Each case calibrated, refined and verified at its answer and one size between: the
    verdicts, the table's rows and the cases as a time record keeps them."""
    from scalebench.launch.slurm_requests import memory_bytes
    from scalebench.planning.capacity.calibration import probe_point, probe_sizes
    from scalebench.planning.capacity.command import answer, measured_iteration
    from scalebench.planning.capacity.configuration import Configuration
    from scalebench.planning.capacity.refine import refined
    from scalebench.planning.capacity.time_model import time_model
    from scalebench.planning.capacity.time_record import RecordedCase, RecordedRun

    verdicts, rows, recorded = [], [], []
    for name in names:
        dataset, dataset_params, solver, solver_params, default = CASES[name]
        budget = memory_bytes(budget_text or default, "--budget", bare_unit="B")
        configuration = Configuration(dataset, dataset_params, solver, solver_params,
                                      "image_size")
        sizes = probe_sizes(configuration)
        load = load_text()
        with Stopwatch() as watch:
            done = refined(configuration, sizes, 1, budget)
        line = answer(configuration, name, 1, budget, done.model, False, done.rounds)
        print(f"{name}: {line.calibration_text()}; wall {watch.seconds:.0f} s; load "
              f"{load} -> {load_text()}", flush=True)
        timing = time_model(done.model.points)
        if line.largest_size is None or timing is None:
            verdicts.append((f"{name}: answer", False, line.reason or "no time model"))
            continue
        for term in timing.terms():
            print(f"  {term.name}: {term.kind} ({term.describe()}), held-out error "
                  f"{term.held_out_error}", flush=True)
        middle = between(configuration, max(sizes), line.largest_size)
        runs = []
        for size in sorted({middle, line.largest_size}):
            counts = configuration.time_counts(size, 1)
            point = probe_point(configuration, size, whole=True)
            runs.append(RecordedRun.measured(size, counts, point.timing))
            iteration = (timing.iteration_seconds(counts), measured_iteration(point.timing))
            setup = (timing.setup_seconds(counts), point.timing["setup_s"])
            ratios = (iteration[0] / iteration[1], setup[0] / setup[1])
            rows.append((name, size, f"{timing.extrapolation(counts):.2g}",
                         f"{iteration[0]:.3g}", f"{iteration[1]:.3g}", f"{ratios[0]:.3f}",
                         f"{setup[0]:.3g}", f"{setup[1]:.3g}", f"{ratios[1]:.3f}"))
            print(f"  at {size}: " + ", ".join(map(str, rows[-1][2:])), flush=True)
            verdicts.append((f"{name} at {size}: s per iteration predicted / measured",
                             ITERATION_RANGE[0] <= ratios[0] <= ITERATION_RANGE[1],
                             f"{ratios[0]:.3f}"))
            verdicts.append((f"{name} at {size}: set-up predicted / measured",
                             SETUP_RANGE[0] <= ratios[1] <= SETUP_RANGE[1], f"{ratios[1]:.3f}"))
        recorded.append(RecordedCase(name, tuple(done.model.points), tuple(runs)))
    return verdicts, rows, recorded


def measured_where(started_load: str) -> dict:
    """Where a record was measured: the commit (and whether the tree differed), the date,
    the load average at the start and the end, the machine."""
    def git(*args: str) -> str:
        return subprocess.run(["git", *args], capture_output=True, text=True,
                              check=False).stdout.strip()

    return {"commit": git("rev-parse", "--short", "HEAD"),
            "tree_changed": bool(git("status", "--porcelain", "--untracked-files=no")),
            "date": date.today().isoformat(), "load_start": started_load,
            "load_end": load_text(),
            "machine": f"{platform.processor() or platform.machine()}, "
                       f"{os.cpu_count()} cores", "command": " ".join(sys.argv)}


def campaign_config(folder: Path, size: int, iterations: int) -> Path:
    """The CT half of the methods example with TV, at ``size``: 10 experiments."""
    raw = yaml.safe_load((Path("configs") / "examples" / "methods.yml").read_text())
    ct = next(entry for entry in raw["dataset"] if "tomography_2d" in entry)
    ct["tomography_2d"]["image_size"] = size
    solvers = []
    for entry in raw["solver"]:
        (name, params), = entry.items()
        params = {**params, "max_iter": iterations} if "max_iter" in params else params
        if name == "pnp":
            params = {**params, "denoiser": "tv"}
        solvers.append({name: params})
    return write_config(folder / "campaign.yml", {**raw, "dataset": [ct], "solver": solvers})


def check_campaign(folder: Path, size: int, iterations: int) -> list:
    """The campaign calibrated, planned and run: its predicted and measured wall time."""
    from scalebench.planning.plan import make_plan

    config = campaign_config(folder, size, iterations)
    calibration = run_scalebench("capacity", config, "--memory", "2GiB", "--quick")
    if calibration.returncode != 0:
        return [("campaign calibration", False, " ".join(calibration.error_lines(1)))]
    print(f"campaign calibration: {calibration.wall_s:.0f} s", flush=True)
    plan = make_plan(config, None, 1)
    totals = plan.to_json()["totals"]
    for job in plan.jobs:
        print(f"  {job.id} {job.label}: predicted {job.predicted_s:.1f} s "
              f"(x{job.extrapolation:.2g} past its probes)" if job.predicted_s is not None
              else f"  {job.id} {job.label}: {job.time_model}", flush=True)
    launch = run_config(config, private_benchmark(folder), "campaign")
    if launch.finished.returncode != 0:
        return [("campaign run", False, " ".join(launch.finished.error_lines(1)))]
    ratio = totals["predicted_s"] / launch.finished.wall_s
    print(f"campaign: {len(plan.jobs)} experiments, {totals['predicted_jobs']} predicted, "
          f"predicted {totals['predicted_s']:.0f} s, measured {launch.finished.wall_s:.0f} s "
          f"(scalebench run, whole), ratio {ratio:.3f}", flush=True)
    return [("campaign: every job predicted", totals["predicted_jobs"] == len(plan.jobs),
             f"{totals['predicted_jobs']}/{len(plan.jobs)}"),
            (f"campaign of {len(plan.jobs)}: plan's predicted total / measured run",
             CAMPAIGN_RANGE[0] <= ratio <= CAMPAIGN_RANGE[1], f"{ratio:.3f}")]


def main(argv: list[str] | None = None) -> int:
    parser = tool_parser(__doc__, __file__)
    parser.add_argument("--only", choices=ANSWER_CASES, nargs="*", default=None)
    parser.add_argument("--budget", default="1.5GiB",
                        help="every answer case's memory budget (default 1.5GiB)")
    parser.add_argument("--no-answers", action="store_true", help="the campaign only")
    parser.add_argument("--campaign", action="store_true",
                        help="also calibrate, plan and run the CT campaign")
    parser.add_argument("--campaign-size", type=int, default=256)
    parser.add_argument("--iterations", type=int, default=40,
                        help="max_iter of the campaign's iterative solvers (default 40)")
    parser.add_argument("--record", type=Path, default=None, metavar="PATH",
                        help="write the answer cases' probes and runs as a time record")
    args = parser.parse_args(argv)
    started_load = load_text()
    folder = Path(tempfile.mkdtemp(prefix="time-check-"))
    os.environ["SCALEBENCH_CACHE"] = str(folder / "cache")
    timed_probes()
    verdicts = []
    if not args.no_answers:
        found, rows, recorded = check_answers(args.only or list(ANSWER_CASES), args.budget)
        verdicts += found
        if args.record is not None:
            from scalebench.planning.capacity.time_record import write_record

            write_record(args.record, recorded, measured_where(started_load))
            print(f"time record: {args.record}", flush=True)
        table = Table("case", "size", "x largest probe", "s/iteration predicted",
                      "measured", "ratio", "set-up s predicted", "measured", "ratio")
        table.header()
        for cells in rows:
            table.row(*cells)
    if args.campaign:
        verdicts += check_campaign(folder, args.campaign_size, args.iterations)
    return print_targets(verdicts)


if __name__ == "__main__":
    sys.exit(main())
