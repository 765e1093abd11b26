"""``scalebench capacity --time`` checked by running its answer: the largest size whose run is
predicted to fit a time budget, then run whole at the ``timeout`` ``scalebench plan`` advises,
with a cold cache (the run computes the operator norm) and again with a warm one (the norm
read from the cache, which plan's prediction knows).

The configuration: the example ``--example`` (configs/examples/multiframe_superres.yml), its
dataset and its PnP solver with ``--denoiser`` (default DnCNN, ``pretrained: auto``: the
bundled weights where the torch hub cache has none), one repetition. In a fresh cache:
``scalebench capacity --time BUDGET`` (its answer and the wall time of the calibration); at
the answer ``scalebench plan`` (the predicted run and the advised timeout); ``scalebench run``
with that timeout (its wall time, every iteration's row, the stop reason); then plan and run
again. Targets: in both runs every iteration recorded and the run complete, and plan's
predicted / measured wall time within 0.8-1.25.

    python -m tools.time_budget_check [--time 3min] [--example multiframe_superres.yml]
        [--denoiser dncnn] [--folder DIR]

Run it on an otherwise idle machine; it prints the load average at the start and the end.
Leave the repository's files as they are while it runs: the calibration's key holds the code
state, so a commit in between leaves plan's prediction uncalibrated.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from pathlib import Path

import yaml

from tools.measuring import (
    REPO,
    Table,
    load_text,
    print_outcome,
    print_targets,
    private_benchmark,
    run_config,
    run_scalebench,
    tool_parser,
    write_config,
)

RUN_RANGE = (0.8, 1.25)


def budget_config(example: str, denoiser: str) -> dict:
    """The example's datasets and its PnP solver with ``denoiser``, one repetition."""
    raw = yaml.safe_load((REPO / "configs" / "examples" / example).read_text())
    pnp = next(entry["pnp"] for entry in raw["solver"] if "pnp" in entry)
    solver = {**pnp, "denoiser": denoiser, "pretrained": "auto"}
    return {"objective": raw["objective"], "dataset": raw["dataset"],
            "solver": [{"pnp": solver}], "n-repetitions": 1,
            "max-runs": int(solver["max_iter"]) + 1, "timeout": raw.get("timeout", "1h")}


def at_size(config: dict, size: int, timeout_s: int | None = None) -> dict:
    """``config`` with its dataset at ``size`` (and ``timeout_s``, where given)."""
    (name, params), = config["dataset"][0].items()
    return {**config, "dataset": [{name: {**params, "image_size": size}}],
            **({"timeout": f"{timeout_s}s"} if timeout_s else {})}


def planned(config: Path) -> tuple[float, int]:
    """plan's predicted run of ``config``'s one experiment and the timeout it advises."""
    from scalebench.planning.plan_time import advised_timeout_s

    done = run_scalebench("plan", config, "--format", "json")
    assert done.returncode == 0, " ".join(done.error_lines(2))
    job, = json.loads(done.stdout)["jobs"]
    assert job["predicted_s"] is not None, f"plan has no prediction: {job.get('time_model')}"
    return job["predicted_s"], advised_timeout_s(job["predicted_s"], 1)


def run_at(folder: Path, benchmark: Path, config: dict, name: str,
           iterations: int) -> tuple[list, list]:
    """Plan, then run ``config`` at the advised timeout: the table's row and the targets."""
    predicted_s, timeout_s = planned(write_config(folder / f"{name}-plan.yml", config))
    path = write_config(folder / f"{name}.yml", {**config, "timeout": f"{timeout_s}s"})
    load = load_text()
    launch = run_config(path, benchmark, name)
    assert launch.finished.returncode == 0, " ".join(launch.finished.error_lines(3))
    rows = launch.rows()
    recorded = int(rows["stop_val"].nunique())
    stops = sorted(set(rows["objective_stop_reason"]))
    ratio = predicted_s / launch.finished.wall_s
    row = [name, f"{predicted_s:.1f}", f"{timeout_s}", f"{launch.finished.wall_s:.1f}",
           f"{ratio:.3f}", f"{recorded}/{iterations + 1}", ",".join(stops),
           f"{load} -> {load_text()}"]
    print("  " + ", ".join(row), file=sys.stderr, flush=True)
    targets = [(f"{name}: every iteration recorded, complete",
                recorded == iterations + 1 and stops == ["complete"],
                f"{recorded} of {iterations + 1} rows, {', '.join(stops)}"),
               (f"{name}: plan's predicted / measured wall time within "
                f"{RUN_RANGE[0]}-{RUN_RANGE[1]}", RUN_RANGE[0] <= ratio <= RUN_RANGE[1],
                f"{ratio:.3f}")]
    return row, targets


def main(argv: list[str] | None = None) -> int:
    parser = tool_parser(__doc__, __file__)
    parser.add_argument("--time", default="3min", help="the time budget (default 3min)")
    parser.add_argument("--example", default="multiframe_superres.yml")
    parser.add_argument("--denoiser", default="dncnn")
    parser.add_argument("--folder", type=Path, default=None,
                        help="working folder (default: a temporary one)")
    args = parser.parse_args(argv)
    folder = (args.folder or Path(tempfile.mkdtemp(prefix="time-budget-"))).resolve()
    folder.mkdir(parents=True, exist_ok=True)
    os.environ["SCALEBENCH_CACHE"] = str(folder / "cache")  # cold: nothing calibrated
    started = load_text()
    config = budget_config(args.example, args.denoiser)
    calibrated = run_scalebench("capacity", write_config(folder / "capacity.yml", config),
                                "--time", args.time, "--format", "json")
    if calibrated.returncode != 0:
        return print_targets([("capacity --time", False,
                               " ".join(calibrated.error_lines(2)))])
    answer, = json.loads(calibrated.stdout)
    size = answer["largest_size"]
    print(f"capacity --time {args.time}: image_size {size} ({answer['binding']} binds), "
          f"predicted run {answer['predicted_run_s']:.1f} s; calibration {calibrated.wall_s:.0f} "
          f"s wall", flush=True)
    if size is None:
        return print_targets([("capacity --time: an answer", False, answer["reason"])])
    benchmark = private_benchmark(folder)
    iterations = int(config["solver"][0]["pnp"]["max_iter"])
    table = Table("cache", "plan predicted s", "timeout s", "measured s", "ratio",
                  "iterations recorded", "stop", "load (1/5/15 min)")
    rows, targets = [], []
    for name in ("cold", "warm"):
        row, found = run_at(folder, benchmark, at_size(config, size), name, iterations)
        rows.append(row)
        targets += found
    return print_outcome(table, rows, targets, started)


if __name__ == "__main__":
    sys.exit(main())
