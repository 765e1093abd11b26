"""The ``scalebench`` command line.

- ``scalebench run CONFIG``: validate the whole experiment, run it with benchopt, publish the
  results parquet atomically (a failed run leaves no result file and never touches earlier
  ones) and render benchopt's HTML report.
- ``scalebench validate CONFIG``: only check the experiment.
- ``scalebench check RESULTS``: compliance of every row's provenance (0 good, 1 findings,
  2 unreadable).
- ``scalebench replay RESULTS``: re-run archived experiments and compare bit for bit (0 when
  every experiment matches).
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
from datetime import datetime
from pathlib import Path

from scalebench.errors import ScalebenchError

DEFAULT_BENCHMARK = Path(__file__).resolve().parent.parent / "benchmark_inference"
EXIT_OK, EXIT_FAILED, EXIT_BAD_INPUT = 0, 1, 2


class RunFailed(ScalebenchError):
    """benchopt itself failed while running a valid experiment."""


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="scalebench", description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    run = commands.add_parser("run", help="validate and run an experiment file")
    run.add_argument("config", type=Path, help="experiment YAML file (see configs/)")
    run.add_argument("--benchmark", type=Path, default=DEFAULT_BENCHMARK,
                     help="benchopt benchmark folder (default: benchmark_inference)")
    run.add_argument("--output", help="result name: <benchmark>/outputs/<name>.parquet "
                     "(default: <config name>_<date-time>); never overwrites")
    run.add_argument("--no-html", action="store_true", help="skip the HTML report")
    validate = commands.add_parser("validate", help="check an experiment file and exit")
    validate.add_argument("config", type=Path, help="experiment YAML file")
    check = commands.add_parser("check", help="check the provenance of a results file")
    check.add_argument("results", type=Path, help="results parquet file")
    replay = commands.add_parser("replay", help="re-run archived results, compare bit for bit")
    replay.add_argument("results", type=Path, help="results parquet file")
    replay.add_argument("--rows", help="rows whose experiments to replay, e.g. '0,4-7' "
                        "(default: all)")
    replay.add_argument("--force", action="store_true", help="replay even where the "
                        "environment differs, comparing within a tolerance")
    replay.add_argument("--benchmark", type=Path, default=DEFAULT_BENCHMARK,
                        help="benchopt benchmark folder (default: benchmark_inference)")
    return parser


def _result_path(benchmark: Path, config: Path, name: str | None) -> Path:
    if name is None:
        name = f"{config.stem}_{datetime.now():%Y-%m-%d_%H%M%S}"
    if not name or os.sep in name or name.startswith("."):
        raise ScalebenchError(f"--output must be a plain file name without '{os.sep}' or a "
                              f"leading dot, got {name!r}")
    path = benchmark / "outputs" / f"{name.removesuffix('.parquet')}.parquet"
    for taken in (path, path.with_suffix("")):
        if taken.exists():
            raise ScalebenchError(f"result {taken} already exists; choose another --output")
    return path


def execute_benchopt(config: Path, benchmark: Path, folder: Path, name: str) -> Path:
    """Run benchopt on ``config`` into ``folder/name.parquet`` (provenance finalised).

    Per-run artefacts (profiler traces) land in ``folder/name/``. Raises RunFailed.
    """
    from provenance.results import finalize

    result = folder / f"{name}.parquet"
    command = [sys.executable, "-m", "benchopt", "run", str(benchmark),
               "--config", str(config.resolve()), "--no-plot", "--no-display", "--no-cache",
               "--output", str(result)]
    # Fail fast: the first error stops the run instead of being skipped silently.
    env = {**os.environ, "BENCHOPT_RAISE_ON_ERROR": "true"}
    status = subprocess.run(command, env=env, check=False).returncode
    if status != 0 or not result.is_file():
        raise RunFailed(f"benchopt run failed (exit status {status}); "
                        f"no result file was written")
    finalize(result)
    return result


def run_experiment(config: Path, benchmark: Path, output: str | None, html: bool) -> Path:
    """Validate, run in a staging folder, render, then publish atomically; return the path."""
    from scalebench.config import load_experiment

    load_experiment(config)
    if not (benchmark / "objective.py").is_file():
        raise ScalebenchError(f"benchmark folder {benchmark} has no objective.py")
    final = _result_path(benchmark, config, output)
    final.parent.mkdir(parents=True, exist_ok=True)
    # Same file system as the destination, so that publishing is an atomic rename.
    staging = Path(tempfile.mkdtemp(prefix=".staging-", dir=final.parent))
    try:
        result = execute_benchopt(config, benchmark, staging, final.stem)
        report = _render_html(result, benchmark) if html else None
        if (staging / final.stem).is_dir():
            os.replace(staging / final.stem, final.with_suffix(""))
        os.replace(result, final)  # readers see no file or the complete one
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    print(f"Results: {final}")
    if report:
        print(f"Report: {report}")
    return final


def _render_html(result: Path, benchmark: Path) -> Path:
    from benchopt.benchmark import Benchmark
    from benchopt.plotting import plot_benchmark

    plot_benchmark(result, benchmark, html=True, display=False)
    return benchmark / "outputs" / f"{Benchmark(benchmark).name}_{result.stem}.html"


def _validate(config: Path) -> int:
    from scalebench.config import load_experiment

    experiment = load_experiment(config)
    runs = sum(len(d.combinations()) for d in experiment.datasets) * sum(
        len(s.combinations()) for s in experiment.solvers)
    print(f"{config}: valid ({runs} dataset x solver combinations)")
    return EXIT_OK


def _check(results: Path) -> int:
    from provenance.check import check_results

    rows, findings = check_results(results)
    for finding in findings:
        print(f"{results}: {finding}")
    if findings:
        print(f"{len(findings)} finding(s) in {rows} rows")
        return EXIT_FAILED
    print(f"{results}: {rows} rows, complete provenance")
    return EXIT_OK


def _replay(args: argparse.Namespace) -> int:
    from scalebench.replay import replay

    all_match = replay(args.results, args.rows, args.force, args.benchmark.resolve())
    return EXIT_OK if all_match else EXIT_FAILED


def main(argv: list[str] | None = None) -> int:
    from provenance.results import UnreadableResults

    args = _parser().parse_args(argv)
    try:
        if args.command == "validate":
            return _validate(args.config)
        if args.command == "check":
            return _check(args.results)
        if args.command == "replay":
            return _replay(args)
        run_experiment(args.config, args.benchmark.resolve(), args.output, not args.no_html)
        return EXIT_OK
    except RunFailed as error:
        print(f"scalebench: error: {error}", file=sys.stderr)
        return EXIT_FAILED
    except (ScalebenchError, UnreadableResults) as error:
        print(f"scalebench: error: {error}", file=sys.stderr)
        return EXIT_BAD_INPUT


if __name__ == "__main__":
    sys.exit(main())
