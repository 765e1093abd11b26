"""What the launcher runs in short-lived child processes because it needs the whole stack
(``scalebench.launch.runner.run_child``), so that the launcher itself holds no torch.

``python -m scalebench.launch.children expand CONFIG --world-size N --folder DIR`` validates the
whole grid for N ranks and writes one benchopt config per experiment into DIR; it prints the
experiments as JSON (scalebench.experiment.expand), each with its predicted times where its
configuration is calibrated (``predicted``: scalebench.planning.plan_time.experiment_prediction,
else null) and the config's restart limit (``restart_limit``: the launcher's
own requeues, scalebench.launch.requeue). ``--check-devices`` (``scalebench run``,
on the machine where the ranks start) also refuses a ``device: cuda`` experiment when this
machine has no CUDA device; ``validate`` and ``plan`` leave that check out, so that a login
node without a GPU can check a GPU config. ``--predict-time`` (``scalebench run``) gives each
experiment its predicted time and ``plan``'s warning where its timeout is too short
(``time``: the launcher warns, or refuses with ``--strict``, before any rank starts).
``... benchmark CONFIG [--benchmark FOLDER]`` prints the name of the repository's benchmark
folder that runs the objective CONFIG names, after refusing a FOLDER (the launch's
``--benchmark``) that is the repository's folder of another objective (scalebench.benchmarks).
``... status RESULTS`` prints the run status of a results file (scalebench.results.store) and
its number of rows; a parquet without a run status is bad input.
``... publish --final F --status S --part ID=PATH ...`` merges finished experiments into F
(atomically; the rows already in F are kept) and records the run status in its metadata,
with ``--stops`` how the experiments that kept no rows ended (provenance.stop_reasons) and
with ``--time-limits`` each experiment's timeout and the one its prediction needs, with
``--requeues`` the job's requeues by the launcher.
``... render RESULTS`` writes the offline HTML report (scalebench.results.report) next to it.
Each child imports what it needs when it runs (this module's own imports are the standard
library's). Exit status 2 with one line on stderr per problem for bad input, 3 with one line
for a write that a full, over-quota or read-only file system refused.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from scalebench.errors import reported, writing


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m scalebench.launch.children")
    children = parser.add_subparsers(dest="child", required=True)
    child = children.add_parser("expand")
    child.add_argument("config", type=Path)
    child.add_argument("--world-size", type=int, default=1)
    child.add_argument("--folder", type=Path, required=True)
    child.add_argument("--benchmark", type=Path, default=None,
                       help="benchmark folder whose solver files the config may name")
    child.add_argument("--check-devices", action="store_true",
                      help="refuse a device this machine does not have")
    child.add_argument("--check-memory", choices=("all", "local"), default="",
                      help="refuse experiments that cannot fit this machine's memory: all, "
                           "or those that name no SLURM resources")
    child.add_argument("--predict-time", action="store_true",
                      help="give each experiment its predicted time and plan's warning where "
                           "its timeout is too short (planning.plan_time.launch_time_checks)")
    child = children.add_parser("benchmark")
    child.add_argument("config", type=Path)
    child.add_argument("--benchmark", type=Path, default=None,
                       help="the benchmark folder given to the launch (--benchmark)")
    child = children.add_parser("status")
    child.add_argument("results", type=Path)
    child = children.add_parser("publish")
    child.add_argument("--final", type=Path, required=True)
    child.add_argument("--status", choices=("partial", "complete"), required=True)
    child.add_argument("--part", action="append", default=[], help="ID=PATH")
    child.add_argument("--failures", default="[]", help="JSON list of failures")
    child.add_argument("--config", default="")
    child.add_argument("--stops", default="{}",
                       help="JSON: experiment id -> how it ended without rows (failed, stopped)")
    child.add_argument("--time-limits", default="{}",
                       help="JSON: experiment id -> its timeout and the one its prediction "
                            "needs (expand --predict-time)")
    child.add_argument("--requeues", default="null",
                       help="JSON: the job's requeues by the launcher (launch.requeue)")
    child = children.add_parser("render")
    child.add_argument("results", type=Path)
    return parser


def benchmark_name(config: Path, given: Path | None) -> str:
    """The name of the repository's benchmark folder for ``config``'s objective (the inference
    one for an unreadable config: ``expand`` then says what is wrong with it); ScalebenchError
    when ``given`` is the repository's folder of another objective."""
    from scalebench.benchmarks import INFERENCE, choose_benchmark, config_benchmark
    from scalebench.errors import ConfigError
    from scalebench.experiment.reading import read_yaml

    try:
        named = config_benchmark(read_yaml(config, "config")).folder
    except ConfigError:
        return INFERENCE.folder
    choose_benchmark(given, named)
    return named


def expanded(args: argparse.Namespace) -> list[dict]:
    """The experiments ``expand`` prints, each with its ``predicted`` times (null where not
    calibrated); with ``--predict-time`` each with its ``time`` too
    (planning.plan_time.launch_time_checks; {} where the config sets no-timeout)."""
    from scalebench.experiment.config import load_config
    from scalebench.experiment.expand import expand_config
    from scalebench.planning.memory import local_memory_check

    refuse = local_memory_check(args.check_memory, args.world_size) \
        if args.check_memory else None
    from scalebench.launch.resources import experiment_ranks
    from scalebench.planning.plan_time import experiment_prediction

    grid = load_config(args.config, args.world_size, args.benchmark)
    experiments = expand_config(grid, args.folder, args.check_devices, refuse)
    repetitions, normed = int(grid.option("n-repetitions")), set()
    for experiment in experiments:  # the launcher's liveness bounds and time checks
        experiment["predicted"] = experiment_prediction(
            experiment, experiment_ranks(experiment, args.world_size), repetitions, normed)
        experiment["restart_limit"] = grid.scalebench["restart-limit"]
    if args.predict_time:
        from scalebench.planning.plan_time import launch_time_checks

        checks = launch_time_checks(grid, experiments)
        for experiment in experiments:
            experiment["time"] = checks.get(experiment["id"], {})
    return experiments


def tuned_record(config: str) -> dict | None:
    """The ``tuned`` record of the config a launch ran (written by scalebench tune); None
    for a config without one."""
    from scalebench.experiment.config import read_config

    return read_config(config).get("tuned") if config else None


def _run(args: argparse.Namespace) -> str:
    """Run the child ``args`` names; its standard output."""
    if args.child == "expand":
        return json.dumps(expanded(args))
    if args.child == "benchmark":
        return benchmark_name(args.config, args.benchmark)
    if args.child == "status":
        from provenance.results import read_row_count
        from scalebench.errors import ConfigError
        from scalebench.results.store import run_status

        record = run_status(args.results)
        if not record:
            raise ConfigError(f"{args.results} is not a results file of scalebench run (no "
                              f"run status in its metadata)")
        return json.dumps({**record, "rows": read_row_count(args.results)})
    if args.child == "publish":
        from provenance.stop_reasons import RECORD_KEY, record_stops
        from scalebench.results.store import publish

        parts = [(item.split("=", 1)[0], Path(item.split("=", 1)[1])) for item in args.part]
        from scalebench.results.report.data import load_results
        from scalebench.results.report.summary import closing_lines

        with writing(f"the results file {args.final}"):
            rows = publish(args.final, parts, args.status, json.loads(args.failures),
                           args.config, record_stops({RECORD_KEY: json.loads(args.stops)}),
                           tuned_record(args.config), json.loads(args.time_limits),
                           json.loads(args.requeues))
        # the launcher's closing lines: the best quality per dataset, the radio runs against
        # a blank sky, the runs that stopped early, where tuned settings came from
        return json.dumps({"rows": rows,
                           "closing": closing_lines(load_results([args.final]))})
    from scalebench.results.report import write_report

    report = args.results.with_suffix(".html")
    with writing(f"the report {report}"):
        write_report([args.results], report)
    return str(report)


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)

    def child() -> int:
        print(_run(args))
        return 0

    return reported(child)


if __name__ == "__main__":
    sys.exit(main())
