"""The ``scalebench`` command line.

``scalebench run CONFIG`` validates the whole experiment, runs it with benchopt, and publishes
the results parquet atomically (a failed or interrupted run leaves no result file behind and
never touches earlier ones), then renders benchopt's HTML report.
``scalebench validate CONFIG`` only checks the experiment.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import uuid
from datetime import datetime
from pathlib import Path

from scalebench.errors import ScalebenchError

DEFAULT_BENCHMARK = Path(__file__).resolve().parent.parent / "benchmark_inference"
EXIT_OK, EXIT_RUN_FAILED, EXIT_BAD_INPUT = 0, 1, 2


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


def run_experiment(config: Path, benchmark: Path, output: str | None, html: bool) -> Path:
    """Validate, run with benchopt, publish the parquet atomically; return its path."""
    from scalebench.config import load_experiment

    load_experiment(config)
    if not (benchmark / "objective.py").is_file():
        raise ScalebenchError(f"benchmark folder {benchmark} has no objective.py")
    final = _result_path(benchmark, config, output)
    partial_name = f".partial-{uuid.uuid4().hex}"
    partial = benchmark / "outputs" / f"{partial_name}.parquet"
    artifacts = partial.with_suffix("")  # per-run files (profiler traces) benchopt puts there
    command = [sys.executable, "-m", "benchopt", "run", str(benchmark),
               "--config", str(config.resolve()), "--no-plot", "--no-display", "--no-cache",
               "--output", partial_name]
    # Fail fast: the first error stops the run instead of being skipped silently.
    env = {**os.environ, "BENCHOPT_RAISE_ON_ERROR": "true"}
    try:
        status = subprocess.run(command, env=env, check=False).returncode
        if status != 0 or not partial.is_file():
            raise ScalebenchError(f"benchopt run failed (exit status {status}); "
                                  f"no result file was written")
        if artifacts.is_dir():
            os.replace(artifacts, final.with_suffix(""))
        os.replace(partial, final)  # atomic: readers see no file or the complete one
    finally:
        partial.unlink(missing_ok=True)
        shutil.rmtree(artifacts, ignore_errors=True)
    print(f"Results: {final}")
    if html:
        _render_html(final, benchmark)
    return final


def _render_html(result: Path, benchmark: Path) -> None:
    from benchopt.benchmark import Benchmark
    from benchopt.plotting import plot_benchmark

    plot_benchmark(result, benchmark, html=True, display=False)
    print(f"Report: {result.parent / f'{Benchmark(benchmark).name}_{result.stem}.html'}")


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        if args.command == "validate":
            from scalebench.config import load_experiment

            experiment = load_experiment(args.config)
            runs = sum(len(d.combinations()) for d in experiment.datasets) * sum(
                len(s.combinations()) for s in experiment.solvers)
            print(f"{args.config}: valid ({runs} dataset x solver combinations)")
            return EXIT_OK
        run_experiment(args.config, args.benchmark.resolve(), args.output, not args.no_html)
        return EXIT_OK
    except ScalebenchError as error:
        print(f"scalebench: error: {error}", file=sys.stderr)
        return EXIT_RUN_FAILED if "benchopt run failed" in str(error) else EXIT_BAD_INPUT


if __name__ == "__main__":
    sys.exit(main())
