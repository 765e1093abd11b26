"""One job: measure whether `scalebench tune` finds settings as good as an exhaustive grid, and
at what cost; whether two workers share a study well; whether a killed tuning resumes.

    python -m tools.tuning_check [--problems ct superres] [--methods pgd drs] [--size 128]
        [--iterations N] [--trials 12] [--grid-sigmas 7] [--grid-values 3] [--folder DIR]
    python -m tools.tuning_check --workers-check [--size 64] [--trials 20]
    python -m tools.tuning_check --resume-check [--size 64] [--trials 6]

The measure (no mode): for each problem (CT: 2D CT with 60 angles and noise 0.05, TV, 40
iterations, algorithms pgd, fista, hqs, admm, drs; super-resolution: the methods example's
problem, TV, 20 iterations, pgd and drs; both at ``--size``), per method:
(a) an exhaustive grid, ``--grid-sigmas`` log-spaced denoiser_sigma values times
``--grid-values`` values of the second parameter (step_scale for pgd and fista, relaxation
for hqs, admm and drs), both spanning the method's declared range
(scalebench.loops.algorithms.spaces), run by one `scalebench run` on the problem's 2
validation images, its best setting the best validation mean; (b) `scalebench tune` over the
same two parameters on the same images, ``--trials`` ended trials; (c) both winners run on the
4 test images. The objective is the tuner's (the best PSNR within the iterations, averaged
over the images). CPU seconds are this process's children's (``getrusage(RUSAGE_CHILDREN)``
around each side: every experiment, pruned and failed trials included). Targets, per problem:
each method's tuned test mean at least the grid-best's minus 0.2 dB, and the tuning's CPU time
at most a third of the grid's.

--workers-check: one `scalebench tune` of CT at ``--size`` (default 64) with one worker, then
one with ``--workers 2``, ``--trials`` (default 20) each, one thread per trial; the wall-time
ratio (target at most 0.6) and the load average before each. --resume-check: a tuning of
``--trials`` (default 6) killed after half its trials ended, then run again, against an
uninterrupted one: the same number of ended trials, and none of the trials ended before the
kill run again (their results files untouched).

Every run uses one thread (``num_threads: 1``); the files go to ``--folder`` (default: a
temporary folder, removed). Exits 1 when a target is missed.
"""

from __future__ import annotations

import math
import os
import resource
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import yaml

from scalebench.benchmarks import INFERENCE
from scalebench.cli_arguments import positive_int
from scalebench.loops.algorithms.spaces import space_for
from scalebench.problems import PROBLEMS as SPECS
from scalebench.repository import REPO
from scalebench.tuning.objective import Objective, image_value
from tools.measuring import (
    Table,
    example_settings,
    print_targets,
    run_scalebench,
    scalebench_command,
    tool_parser,
    write_config,
)

# The second parameter searched beside denoiser_sigma.
SECOND = {"pgd": "step_scale", "fista": "step_scale", "hqs": "relaxation",
          "admm": "relaxation", "drs": "relaxation"}
TARGET_DB, TARGET_CPU, TARGET_WORKERS = 0.2, 1 / 3, 0.6
METRIC = "objective_psnr_db"


@dataclass(frozen=True)
class Problem:
    dataset: str
    params: dict
    iterations: int
    methods: tuple[str, ...]


def problems() -> dict[str, Problem]:
    datasets, _ = example_settings("methods.yml")
    superres = {k: v for k, v in datasets["multiframe_superres"].items() if k != "image_size"}
    return {"ct": Problem("tomography_2d", {"num_angles": 60, "noise_level": 0.05}, 40,
                          ("pgd", "fista", "hqs", "admm", "drs")),
            "superres": Problem("multiframe_superres", superres, 20, ("pgd", "drs"))}


@dataclass(frozen=True)
class Case:
    """One method of one problem, at the run's size and iterations."""

    problem: str
    spec: Problem
    method: str
    size: int
    iterations: int

    @property
    def name(self) -> str:
        return f"{self.problem}-{self.method}"

    def split(self, split: str) -> list[str]:
        return list(SPECS[self.spec.dataset].images.split(split))

    def config(self, images: list[str], solver: dict) -> dict:
        dataset = {**self.spec.params, "image_size": self.size, "image": images}
        return {"objective": [INFERENCE.objective],
                "dataset": [{self.spec.dataset: dataset}],
                "solver": [{"pnp": {"algorithm": self.method, "denoiser": "tv",
                                    "init": "adjoint", "max_iter": self.iterations,
                                    "device": "cpu", "num_threads": 1, **solver}}],
                "max-runs": self.iterations + 1, "timeout": "1h"}


def grid(case: Case, sigmas: int, values: int) -> dict[str, list[float]]:
    """Log-spaced sigmas and linear values of the second parameter over the declared ranges."""
    space = space_for(case.method, "tv")
    sigma, second = space.range("denoiser_sigma"), space.range(SECOND[case.method])
    return {"denoiser_sigma": spaced(sigma.low, sigma.high, sigmas, log=True),
            second.name: spaced(second.low, second.high, values, log=False)}


def spaced(low: float, high: float, count: int, log: bool) -> list[float]:
    if count == 1:
        return [math.sqrt(low * high) if log else (low + high) / 2]
    if log:
        return [float(f"{low * (high / low) ** (i / (count - 1)):.4g}") for i in range(count)]
    return [float(f"{low + (high - low) * i / (count - 1):.4g}") for i in range(count)]


def children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def scalebench(*args: object) -> tuple[float, float]:
    """`scalebench ARGS` run to its end: (children's CPU seconds, wall seconds); a failure
    ends the tool with its last lines."""
    before = children_cpu()
    done = run_scalebench(*args)
    if done.returncode not in (0,):
        sys.exit(f"tuning_check: scalebench {' '.join(map(str, args[:2]))} failed "
                 f"(exit {done.returncode}): {' | '.join(done.error_lines(3))}")
    return children_cpu() - before, done.wall_s


def means(results: Path, keys: list[str]) -> dict[tuple, float]:
    """The mean over images of each setting's best PSNR (the tuner's objective), by the
    values of the solver parameters ``keys``; settings missing an image left out."""
    import pandas as pd

    rows = pd.read_parquet(results)
    values: dict[tuple, list[float]] = {}
    for _, mine in rows.groupby("experiment_id"):
        setting = tuple(float(mine[f"p_solver_{key}"].iloc[0]) for key in keys)
        value = image_value(mine[mine["idx_rep"] == 0], METRIC, Objective())
        values.setdefault(setting, []).append(math.nan if value is None else value)
    images = max(len(v) for v in values.values())
    return {s: sum(v) / len(v) for s, v in values.items() if len(v) == images}


def measure_case(case: Case, folder: Path, trials: int, sigmas: int, count: int) -> dict:
    """(a), (b) and (c) for one method."""
    values = grid(case, sigmas, count)
    keys = list(values)
    validation, test = case.split("validation"), case.split("test")
    grid_config = write_config(folder / f"{case.name}-grid.yml", case.config(validation, values))
    grid_cpu, _ = scalebench("run", grid_config, "--outputs", folder, "--output",
                             f"{case.name}-grid", "--no-html")
    found = means(folder / f"{case.name}-grid.parquet", keys)
    grid_best = max((s for s in found if math.isfinite(found[s])), key=found.get)
    tune_config = case.config(validation, {})
    tune_config["tune"] = {key: None for key in keys}
    tune_path = write_config(folder / f"{case.name}.yml", tune_config)
    tune_cpu, _ = scalebench("tune", tune_path, "--trials", trials, "--outputs", folder,
                             "--output", f"{case.name}-tune")
    tuned_path = folder / f"{case.name}-tune.yml"
    (record,) = yaml.safe_load(tuned_path.read_text())["tuned"].values()
    tuned = tuple(float(record["setting"][key]) for key in keys)
    best_config = write_config(folder / f"{case.name}-grid-best.yml", case.config(
        test, dict(zip(keys, grid_best, strict=True))))
    scalebench("run", best_config, "--outputs", folder, "--output", f"{case.name}-grid-test",
               "--no-html")
    scalebench("run", tuned_path, "--outputs", folder, "--output", f"{case.name}-tune-test",
               "--no-html")
    (grid_test,) = means(folder / f"{case.name}-grid-test.parquet", keys).values()
    (tuned_test,) = means(folder / f"{case.name}-tune-test.parquet", keys).values()
    states = trial_states(folder / f"{case.name}-tune.parquet")
    return {"keys": keys, "grid": grid_best, "grid_val": found[grid_best],
            "grid_test": grid_test, "grid_cpu": grid_cpu, "grid_settings": len(found),
            "tuned": tuned, "tuned_val": record["value"], "tuned_test": tuned_test,
            "tune_cpu": tune_cpu, "states": states}


def trial_states(results: Path) -> dict[str, int]:
    import pandas as pd

    rows = pd.read_parquet(results, columns=["tune_trial", "tune_state"])
    return rows.drop_duplicates("tune_trial")["tune_state"].value_counts().to_dict()


def setting_text(keys: list[str], values: tuple) -> str:
    short = {"denoiser_sigma": "σ", "step_scale": "step", "relaxation": "β"}
    return ", ".join(f"{short[k]} {v:.3g}" for k, v in zip(keys, values, strict=True))


def run_measure(args, folder: Path) -> int:
    table = Table("problem", "method", "grid best (validation dB)", "tuned (validation dB)",
                  "grid test dB", "tuned test dB", "tuned - grid dB", "trials: pruned, failed",
                  "grid CPU s", "tune CPU s", "tune / grid CPU")
    table.header()
    targets = []
    for problem in args.problems:
        spec = problems()[problem]
        methods = [m for m in (args.methods or spec.methods) if m in SECOND]
        cpu = [0.0, 0.0]
        for method in methods:
            case = Case(problem, spec, method, args.size or 128,
                        args.iterations or spec.iterations)
            found = measure_case(case, folder, args.trials, args.grid_sigmas, args.grid_values)
            gap = found["tuned_test"] - found["grid_test"]
            states = found["states"]
            table.row(problem, method,
                      f"{setting_text(found['keys'], found['grid'])} ({found['grid_val']:.2f})",
                      f"{setting_text(found['keys'], found['tuned'])} "
                      f"({found['tuned_val']:.2f})",
                      f"{found['grid_test']:.2f}", f"{found['tuned_test']:.2f}", f"{gap:+.2f}",
                      f"{sum(states.values())}: {states.get('pruned', 0)}, "
                      f"{states.get('fail', 0)}",
                      f"{found['grid_cpu']:.0f}", f"{found['tune_cpu']:.0f}",
                      f"{found['tune_cpu'] / found['grid_cpu']:.2f}")
            cpu[0] += found["grid_cpu"]
            cpu[1] += found["tune_cpu"]
            targets.append((f"{problem} {method}: tuned test mean >= grid-best's - "
                            f"{TARGET_DB} dB", gap >= -TARGET_DB, f"{gap:+.2f} dB"))
        if methods:
            targets.append((f"{problem}: tuning CPU <= {TARGET_CPU:.2f} x grid's",
                            cpu[1] <= TARGET_CPU * cpu[0],
                            f"{cpu[1]:.0f} s / {cpu[0]:.0f} s = {cpu[1] / cpu[0]:.2f}"))
    return print_targets(targets)


def tune_command(case: Case, folder: Path, name: str, trials: int, *more: object) -> list:
    config = case.config(case.split("validation"), {})
    config["tune"] = {"denoiser_sigma": None, SECOND[case.method]: None}
    path = write_config(folder / f"{name}.yml", config)
    return ["tune", path, "--trials", trials, "--outputs", folder, "--output", name, *more]


def run_workers_check(args, folder: Path) -> int:
    case = check_case(args, 64)
    trials = args.trials or 20
    table = Table("workers", "trials", "wall s", "CPU s", "load before (1, 5, 15 min)")
    table.header()
    walls = []
    for workers in (1, 2):
        load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
        cpu, wall = scalebench(*tune_command(case, folder, f"workers-{workers}", trials,
                                             "--workers", workers))
        walls.append(wall)
        table.row(workers, trials, f"{wall:.0f}", f"{cpu:.0f}", load)
    print(f"cores: {os.cpu_count()}")
    ratio = walls[1] / walls[0]
    return print_targets([(f"2 workers <= {TARGET_WORKERS} x 1 worker's wall time",
                           ratio <= TARGET_WORKERS, f"{ratio:.3f}")])


def check_case(args, size: int) -> Case:
    problem = args.problems[0]
    spec = problems()[problem]
    method = (args.methods or spec.methods)[0]
    return Case(problem, spec, method, args.size or size, args.iterations or spec.iterations)


def study_trials(folder: Path) -> list:
    import optuna

    from scalebench.rank.trial_report import journal_storage

    (journal,) = folder.glob("*.journal")
    return optuna.load_study(study_name=journal.stem,
                             storage=journal_storage(journal)).get_trials()


def ended(trials: list) -> list:
    return [t for t in trials if t.state.name in ("COMPLETE", "PRUNED")]


def run_resume_check(args, folder: Path) -> int:
    case = check_case(args, 64)
    trials = args.trials or 6
    half = max(1, trials // 2)
    command = scalebench_command(*tune_command(case, folder, "killed", trials))
    process = subprocess.Popen(command, cwd=REPO, stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, text=True, start_new_session=True)
    for line in process.stdout:
        if f"trial {half} of {trials}" in line:
            time.sleep(2)  # the next trial started: killed while it runs
            break
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except ProcessLookupError:  # it ended before half its trials: nothing was killed
        pass
    process.wait()
    before = {t.number: t for t in ended(study_trials(folder / "killed"))}
    files = {n: (folder / "killed" / "trials").glob(f"*-trial-{n:04d}.parquet")
             for n in before}
    stamps = {n: [p.stat().st_mtime_ns for p in paths] for n, paths in files.items()}
    scalebench(*tune_command(case, folder, "killed", trials))
    resumed = study_trials(folder / "killed")
    scalebench(*tune_command(case, folder, "whole", trials))
    whole = study_trials(folder / "whole")
    kept = all(t.number in before and t.params == before[t.number].params
               and t.state == before[t.number].state
               for t in resumed if t.number in before)
    untouched = all([p.stat().st_mtime_ns for p in
                     (folder / "killed" / "trials").glob(f"*-trial-{n:04d}.parquet")]
                    == stamps[n] for n in before)
    print(f"killed after {len(before)} ended trial(s); resumed: {len(ended(resumed))} ended, "
          f"{sum(t.state.name == 'FAIL' for t in resumed)} failed; uninterrupted: "
          f"{len(ended(whole))} ended")
    return print_targets([
        ("ended trials equal an uninterrupted tuning's",
         len(ended(resumed)) == len(ended(whole)) == trials,
         f"{len(ended(resumed))} and {len(ended(whole))} of {trials}"),
        ("no trial ended before the kill run again", kept and untouched,
         f"{len(before)} kept with their settings, results files untouched: {untouched}")])


def main(argv: list[str] | None = None) -> int:
    parser = tool_parser(__doc__, __file__)
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--workers-check", action="store_true",
                      help="one worker against two on one study, wall time")
    mode.add_argument("--resume-check", action="store_true",
                      help="a tuning killed half way and run again")
    parser.add_argument("--problems", nargs="+", choices=("ct", "superres"),
                        default=["ct", "superres"], help="(the checks: the first)")
    parser.add_argument("--methods", nargs="+", choices=list(SECOND), default=None,
                        help="algorithms (default: ct pgd fista hqs admm drs; superres pgd "
                        "drs); the checks take the first")
    parser.add_argument("--size", type=positive_int, default=None,
                        help="image side (default 128; the checks: 64)")
    parser.add_argument("--iterations", type=positive_int, default=None,
                        help="iterations per run (default: 40 on ct, 20 on superres)")
    parser.add_argument("--trials", type=positive_int, default=None,
                        help="ended trials per tuning (default 12; --workers-check 20, "
                        "--resume-check 6)")
    parser.add_argument("--grid-sigmas", type=positive_int, default=7,
                        help="log-spaced denoiser_sigma values of the grid (default 7)")
    parser.add_argument("--grid-values", type=positive_int, default=3,
                        help="values of the second parameter in the grid (default 3)")
    parser.add_argument("--folder", type=Path, default=None,
                        help="where configs and results go (default: a temporary folder)")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="tuning-check-") as scratch:
        folder = (args.folder or Path(scratch)).resolve()
        folder.mkdir(parents=True, exist_ok=True)
        if args.workers_check:
            return run_workers_check(args, folder)
        if args.resume_check:
            return run_resume_check(args, folder)
        args.trials = args.trials or 12
        return run_measure(args, folder)


if __name__ == "__main__":
    sys.exit(main())
