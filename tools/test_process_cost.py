"""Where a test run's CPU goes: every Python process the tests start, its CPU time and the test
that started it, and the floor that importing the run's stack in each of them sets.

Runs pytest (default: what `make test-quick` runs, `tests/unit tests/integration` on two
workers) with a `sitecustomize` on PYTHONPATH that appends, when each Python process exits, its
command line, its own CPU time (user + system), whether it imported torch, and the test that
started it (pytest's PYTEST_CURRENT_TEST, which children inherit). A process that ends without
running its exit handlers (killed by a signal, `os._exit`) is not logged: the pytest run's own
CPU time, children included, is printed beside the logged sum. Then, in the same session,
measures the CPU time of a fresh process that only imports the run's stack
(`scalebench.rank.startup.import_and_freeze`), `--repeats` times, and prints:

- the run's wall time, its CPU time and pytest's exit status;
- the logged processes grouped by what they run (count, CPU, how many imported torch);
- the tests whose processes took the most CPU;
- the import floor: processes that imported torch x the median import-only CPU / workers, the
  wall time the run cannot go below on this machine however little its tests compute, against
  the 5-minute target of `make test-quick`.

    python -m tools.test_process_cost [--workers 2] [--top 15] [--repeats 3] [PATH ...]

Exits with pytest's status.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from collections import defaultdict
from pathlib import Path

from scalebench.repository import REPO
from tools.measuring import Stopwatch, Table, add_repeats, median, tool_parser

DEFAULT_PATHS = ("tests/unit", "tests/integration")
TARGET_S = 300.0  # make test-quick's target wall time
LOG_VARIABLE = "SCALEBENCH_PROCESS_LOG"
# Appended to by every Python process of the run, at its exit.
HOOK = f'''
import atexit, json, os, resource, sys


def _log_process():
    usage = resource.getrusage(resource.RUSAGE_SELF)
    record = {{"argv": list(getattr(sys, "orig_argv", sys.argv)),
              "cpu_s": usage.ru_utime + usage.ru_stime,
              "torch": "torch" in sys.modules,
              "test": os.environ.get("PYTEST_CURRENT_TEST", "").rsplit(" (", 1)[0]}}
    with open(os.environ["{LOG_VARIABLE}"], "a") as log:
        log.write(json.dumps(record) + "\\n")


if os.environ.get("{LOG_VARIABLE}"):
    atexit.register(_log_process)
'''
IMPORT_ONLY = "from scalebench.rank.startup import import_and_freeze; import_and_freeze()"


def process_kind(argv: list[str]) -> str:
    """What a process runs, from its command line: `-m module [subcommand]`, `-c` code (its
    first words), a script's name, or pytest's own worker."""
    options = argv[1:]
    while options and options[0].startswith("-") and options[0] not in ("-m", "-c"):
        options = options[1:]
    if not options:
        return "python"
    if options[0] == "-m":
        words = options[1:3]
        if len(words) == 2 and (words[1].startswith("-") or "/" in words[1]):
            words = words[:1]
        return "-m " + " ".join(words)
    if options[0] == "-c":
        code = options[1] if len(options) > 1 else ""
        if "sys.stdin" in code:  # execnet's bootstrap: a pytest-xdist worker
            return "pytest worker"
        return "-c " + " ".join(code.split())[:48]
    return Path(options[0]).name


def run_tests(paths: list[str], workers: int, log: Path) -> tuple[int, float, float]:
    """Run pytest with the hook; (exit status, wall seconds, CPU seconds with children)."""
    hook_folder = log.parent / "hook"
    hook_folder.mkdir()
    (hook_folder / "sitecustomize.py").write_text(HOOK)
    path = os.pathsep.join(filter(None, [str(hook_folder), os.environ.get("PYTHONPATH")]))
    env = {**os.environ, "PYTHONPATH": path, LOG_VARIABLE: str(log)}
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *paths]
    if workers:
        command[4:4] = ["-n", str(workers), "--no-loadscope-reorder"]
    with Stopwatch() as wall:
        process = subprocess.Popen(command, cwd=REPO, env=env)
        _, status, usage = os.wait4(process.pid, 0)
    return os.waitstatus_to_exitcode(status), wall.seconds, usage.ru_utime + usage.ru_stime


def import_cpu_seconds(repeats: int) -> float:
    """The median CPU time of a fresh process that imports the run's stack and exits."""
    times = []
    for _ in range(repeats):
        process = subprocess.Popen([sys.executable, "-c", IMPORT_ONLY], cwd=REPO)
        _, status, usage = os.wait4(process.pid, 0)
        if os.waitstatus_to_exitcode(status) != 0:
            sys.exit("importing the run's stack failed")
        times.append(usage.ru_utime + usage.ru_stime)
    return median(times)


def read_log(log: Path) -> list[dict]:
    if not log.is_file():
        return []
    return [json.loads(line) for line in log.read_text().splitlines() if line.strip()]


def print_kinds(records: list[dict]) -> None:
    kinds: dict[str, list[dict]] = defaultdict(list)
    for record in records:
        kinds[process_kind(record["argv"])].append(record)
    table = Table("processes", "torch", "CPU s", "what they run")
    table.header()
    for kind, group in sorted(kinds.items(), key=lambda item: -sum(r["cpu_s"] for r in item[1])):
        heavy = sum(record["torch"] for record in group)
        cpu = sum(record["cpu_s"] for record in group)
        table.row(len(group), heavy, f"{cpu:.1f}", kind)


def print_tests(records: list[dict], top: int) -> None:
    tests: dict[str, list[dict]] = defaultdict(list)
    for record in records:
        if record["test"] and process_kind(record["argv"]) != "pytest worker":
            tests[record["test"]].append(record)
    ranked = sorted(tests.items(), key=lambda item: -sum(r["cpu_s"] for r in item[1]))
    print(f"\nthe {min(top, len(ranked))} tests whose processes took the most CPU:")
    table = Table("processes", "CPU s", "test")
    table.header()
    for test, group in ranked[:top]:
        table.row(len(group), f"{sum(r['cpu_s'] for r in group):.1f}", test)


def main(argv: list[str] | None = None) -> int:
    parser = tool_parser(__doc__, __file__)
    parser.add_argument("paths", nargs="*", default=list(DEFAULT_PATHS),
                        help="what pytest runs (default: tests/unit tests/integration)")
    parser.add_argument("--workers", type=int, default=2,
                        help="pytest-xdist workers, 0 for none (default 2, as make test-quick)")
    parser.add_argument("--top", type=int, default=15, help="tests listed (default 15)")
    add_repeats(parser, 3, "import-only processes timed")
    args = parser.parse_args(argv)
    if args.workers < 0 or args.top < 0:
        parser.error("--workers and --top must be at least 0")
    with tempfile.TemporaryDirectory() as folder:
        log = Path(folder) / "processes.jsonl"
        status, wall, cpu = run_tests(args.paths, args.workers, log)
        records = read_log(log)
    import_cpu = import_cpu_seconds(args.repeats)
    logged = sum(record["cpu_s"] for record in records)
    heavy = sum(record["torch"] for record in records)
    print(f"\npytest {' '.join(args.paths)} on {args.workers or 'no'} workers: exit status "
          f"{status}, {wall:.0f} s wall, {cpu:.0f} s CPU with its children "
          f"({len(records)} processes logged, {logged:.0f} s of it)")
    print_kinds(records)
    print_tests(records, args.top)
    cores = max(1, min(args.workers, os.cpu_count() or 1))  # processes CPU-bound in parallel
    floor = heavy * import_cpu / cores
    print(f"\nimporting the run's stack in a fresh process: {import_cpu:.2f} s of CPU "
          f"(median of {args.repeats})")
    print(f"import floor: {heavy} process(es) imported torch x {import_cpu:.2f} s / {cores} "
          f"core(s) busy = {floor:.0f} s wall ({floor / TARGET_S:.2f}x the {TARGET_S:.0f} s target "
          f"of make test-quick); measured {wall:.0f} s ({wall / TARGET_S:.2f}x)")
    return status


if __name__ == "__main__":
    sys.exit(main())
