"""What the measurement scripts of tools/ share: clocks that synchronise the device, medians
and spreads, the markdown table they print, their common command-line arguments, child
processes that measure one configuration each, and launches of `scalebench run` whose results
they read back.

Every script runs from the repository root as ``python -m tools.NAME``. Torch and pandas are
imported where they are used, so that a script that measures processes (the launcher's memory,
a test run's CPU time) stays light itself.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Generic, TextIO, TypeVar

import yaml

from scalebench.benchmarks import INFERENCE
from scalebench.cli_arguments import positive_int
from scalebench.repository import REPO
from scalebench.statistics import Summary
from scalebench.statistics import summary as statistics_summary

if TYPE_CHECKING:
    import pandas as pd
    import torch

T = TypeVar("T")
DEFAULT_CONFIG = REPO / "configs" / "default.yml"


# --- timing -------------------------------------------------------------------------------

def synchronise(device: torch.device | str | None) -> None:
    """Wait for the work queued on ``device`` (CUDA); nothing on the CPU or without one."""
    if device is None:
        return
    import torch

    from scalebench.rank.profiling import synchronize

    synchronize(torch.device(device))


class Stopwatch:
    """Wall seconds of a ``with`` block, ``device`` synchronised before the clock starts and
    before it stops: without it a GPU's queued kernels land in the next block's time."""

    def __init__(self, device: torch.device | str | None = None) -> None:
        self.device = device
        self.seconds = 0.0
        self._start = 0.0

    def __enter__(self) -> Stopwatch:
        synchronise(self.device)
        self._start = time.perf_counter()
        return self

    def __exit__(self, *_: object) -> None:
        synchronise(self.device)
        self.seconds = time.perf_counter() - self._start


@dataclass(frozen=True)
class Timed(Generic[T]):
    """The seconds of each call and the last call's result."""

    seconds: list[float]
    result: T

    @property
    def median(self) -> float:
        return summary(self.seconds).median


def timed(function: Callable[[], T], repeats: int,
          device: torch.device | str | None = None) -> Timed[T]:
    """``function`` called ``repeats`` times, each call on its own synchronised clock."""
    if repeats < 1:
        raise ValueError(f"repeats must be at least 1, not {repeats}")
    seconds, result = [], None
    for _ in range(repeats):
        with Stopwatch(device) as watch:
            result = function()
        seconds.append(watch.seconds)
    return Timed(seconds, result)


# --- medians and spreads --------------------------------------------------------------------

def summary(values: Iterable[float]) -> Summary:
    """The figures of repeated measurements (scalebench.statistics, as the report's)."""
    found = statistics_summary(values)
    if not found.values:
        raise ValueError("no values to summarise")
    return found


def median(values: Iterable[float]) -> float:
    return summary(values).median


# --- tables ---------------------------------------------------------------------------------

def table_line(cells: Sequence[object]) -> str:
    """One markdown row; a ``|`` inside a cell (an error message's) is escaped."""
    return "| " + " | ".join(str(cell).replace("|", "\\|") for cell in cells) + " |"


class Table:
    """A markdown table printed row by row as its figures come: a measurement of minutes per
    row shows each row when it is done. A short row (a size that failed, was skipped) is
    padded with empty cells."""

    def __init__(self, *columns: str, stream: TextIO | None = None) -> None:
        self.columns = columns
        self.stream = stream

    def header(self) -> None:
        self._print(table_line(self.columns))
        self._print(table_line(["---"] * len(self.columns)).replace(" ", ""))

    def row(self, *cells: object) -> None:
        if len(cells) > len(self.columns):
            raise ValueError(f"{len(cells)} cells for the {len(self.columns)} columns "
                             f"{', '.join(self.columns)}")
        self._print(table_line([*cells, *[""] * (len(self.columns) - len(cells))]))

    def _print(self, line: str) -> None:
        print(line, file=self.stream or sys.stdout, flush=True)


def print_targets(targets: Sequence[tuple[str, bool, str]]) -> int:
    """One line a (name, met, detail) target; the exit status: 1 when one is missed."""
    for name, met, detail in targets:
        print(f"{'met' if met else 'MISSED'}: {name}: {detail}")
    return 0 if all(met for _, met, _ in targets) else 1


def load_text() -> str:
    """The machine's load average over 1, 5 and 15 minutes, as '0.5/1.2/2.0'."""
    return "/".join(f"{value:.1f}" for value in os.getloadavg())


def print_outcome(table: Table, rows: Iterable[Sequence[object]],
                  targets: Sequence[tuple[str, bool, str]], started_load: str) -> int:
    """A measurement's closing lines: its table, its targets and the load average at its
    start and now; the exit status of print_targets."""
    table.header()
    for cells in rows:
        table.row(*cells)
    status = print_targets(targets)
    print(f"load average (1/5/15 min): {started_load} at the start, {load_text()} at the end")
    return status


# --- command-line arguments -----------------------------------------------------------------

def tool_parser(doc: str, file: str) -> argparse.ArgumentParser:
    """A script's parser: its ``python -m tools.NAME`` command and its docstring as help."""
    return argparse.ArgumentParser(prog=f"python -m tools.{Path(file).stem}", description=doc,
                                   formatter_class=argparse.RawDescriptionHelpFormatter)


def _size_list(text: str) -> list[int]:
    return [positive_int(part) for part in text.split(",") if part]


class _Sizes(argparse.Action):
    """``--sizes 64 256`` and ``--sizes 64,256`` alike: one list of sizes."""

    def __call__(self, parser, namespace, values, option_string=None) -> None:
        setattr(namespace, self.dest, [size for part in values for size in part])


def add_sizes(parser: argparse.ArgumentParser, default: list[int], what: str = "image sides"
              ) -> None:
    parser.add_argument("--sizes", nargs="+", type=_size_list, action=_Sizes, default=default,
                        metavar="SIZE",
                        help=f"{what}, space- or comma-separated (default: "
                             f"{' '.join(map(str, default))})")


def add_repeats(parser: argparse.ArgumentParser, default: int,
                what: str = "measurements per figure, their median printed") -> None:
    parser.add_argument("--repeats", type=positive_int, default=default,
                        help=f"{what} (default {default})")


def add_iterations(parser: argparse.ArgumentParser, default: int,
                   what: str = "iterations per run") -> None:
    parser.add_argument("--iterations", type=positive_int, default=default,
                        help=f"{what} (default {default})")


def add_device(parser: argparse.ArgumentParser, default: str = "cpu",
               choices: Sequence[str] = ("cpu", "cuda"), help: str | None = None) -> None:
    parser.add_argument("--device", default=default, choices=tuple(choices),
                        help=help or f"where the measurement runs (default {default})")


def add_threads(parser: argparse.ArgumentParser, default: int = 0) -> None:
    parser.add_argument("--threads", type=int, default=default,
                        help=f"torch threads (0: torch's default; default {default})")


def apply_threads(threads: int) -> None:
    """``--threads``: torch's thread count, left as it is for 0."""
    if threads:
        import torch

        torch.set_num_threads(threads)


def add_config(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--config", type=Path, default=DEFAULT_CONFIG,
                        help="the config run (default: configs/default.yml)")


def add_child(parser: argparse.ArgumentParser) -> None:
    """The hidden ``--child ARG ...`` of a script that measures each case in a fresh process
    (``child_figures``)."""
    parser.add_argument("--child", nargs="+", help=argparse.SUPPRESS)


# --- child processes ------------------------------------------------------------------------

class ChildFailed(RuntimeError):
    """A measuring child process exited with an error: the last line it wrote to stderr."""


def child_figures(module: str, *args: object, env: dict[str, str] | None = None) -> dict:
    """``python -m module --child ARGS`` in a fresh process (its peaks its own): the JSON
    document it prints last."""
    done = subprocess.run([sys.executable, "-m", module, "--child", *map(str, args)], cwd=REPO,
                          capture_output=True, text=True, env=env, check=False)
    if done.returncode != 0:
        raise ChildFailed((done.stderr.strip().splitlines() or ["no output"])[-1])
    return json.loads(done.stdout.strip().splitlines()[-1])


def print_figures(figures: dict) -> None:
    """A child's answer to ``child_figures``."""
    print(json.dumps(figures))


# --- launches of scalebench run -------------------------------------------------------------

def private_benchmark(folder: Path) -> Path:
    """A copy of the inference benchmark in ``folder``: a launch's outputs land there, not in
    the repository's. A copy already there (a tool's ``--folder`` given again) is brought up to
    date and keeps its outputs."""
    return Path(shutil.copytree(INFERENCE.path, folder / INFERENCE.folder, dirs_exist_ok=True,
                                ignore=shutil.ignore_patterns("outputs", "__pycache__")))


def example_settings(file: str) -> tuple[dict[str, dict], dict[str, dict]]:
    """A shipped example's (configs/examples/FILE) datasets and solvers by name, in its order:
    each name's first entry, each parameter at its first value where the example lists
    several."""
    raw = yaml.safe_load((REPO / "configs" / "examples" / file).read_text())

    def first(entries: list[dict]) -> dict[str, dict]:
        found: dict[str, dict] = {}
        for name, values in (item for entry in entries for item in entry.items()):
            found.setdefault(name, {key: value[0] if isinstance(value, list) else value
                                    for key, value in (values or {}).items()})
        return found

    return first(raw["dataset"]), first(raw["solver"])


def write_config(path: Path, document: dict) -> Path:
    path.write_text(yaml.safe_dump(document, sort_keys=False))
    return path


def pnp_config(dataset: dict, solver: dict, iterations: int, timeout: str) -> dict:
    """A config of one PnP experiment on ``dataset``: ``iterations`` iterations, each one
    evaluated."""
    return {"objective": [INFERENCE.objective], "dataset": [dataset],
            "solver": [{"pnp": {**solver, "max_iter": iterations}}],
            "max-runs": iterations + 1, "timeout": timeout}


def scalebench_command(*args: object) -> list[str]:
    return [sys.executable, "-m", "scalebench", *map(str, args)]


def launch_command(config: Path, benchmark: Path, output: str, nproc: int = 1,
                   options: Sequence[object] = ()) -> list[str]:
    """`scalebench run` of ``config`` into ``benchmark``'s outputs/OUTPUT.parquet, with
    further `run` ``options`` (``--runtime podman``...)."""
    return scalebench_command("run", config, "--benchmark", benchmark, "--output", output,
                              "--no-html", "--nproc", nproc, *options)


@dataclass(frozen=True)
class Finished:
    """A scalebench command that ran to its end: its exit status, output and wall time."""

    returncode: int
    stdout: str
    stderr: str
    wall_s: float

    def error_lines(self, count: int) -> list[str]:
        """The last ``count`` non-empty lines of stderr."""
        return [line for line in self.stderr.splitlines() if line.strip()][-count:]


def run_scalebench(*args: object) -> Finished:
    """`scalebench ARGS` in a child process, timed."""
    return _finished(scalebench_command(*args))


def _finished(command: list[str]) -> Finished:
    with Stopwatch() as watch:
        done = subprocess.run(command, capture_output=True, text=True, check=False)
    return Finished(done.returncode, done.stdout, done.stderr, watch.seconds)


@dataclass(frozen=True)
class Launch:
    """One `scalebench run` and the results file it publishes."""

    finished: Finished
    results: Path

    def rows(self) -> pd.DataFrame:
        import pandas as pd

        return pd.read_parquet(self.results)


def run_config(config: Path, benchmark: Path, output: str, nproc: int = 1,
               options: Sequence[object] = (), prefix: Sequence[str] = ()) -> Launch:
    """`launch_command`, timed, under the command ``prefix`` (``taskset -c 0``) if any."""
    finished = _finished([*prefix, *launch_command(config, benchmark, output, nproc, options)])
    return Launch(finished, launched_results(benchmark, output))


def launched_results(benchmark: Path, output: str) -> Path:
    """Where `launch_command` publishes the results named ``output``."""
    return benchmark / "outputs" / f"{output}.parquet"

