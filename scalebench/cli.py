"""The ``scalebench`` command line: one function per subcommand (``COMMANDS``) and one
exit-status rule (scalebench.errors.exit_status); the parser is scalebench.cli_arguments
(docs/cli.md is generated from it).

This module and the launcher import only the standard library: the process that waits for a
run holds no torch, deepinv or problem data.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import sys
import tempfile
from pathlib import Path

from scalebench.cli_arguments import build_parser
from scalebench.errors import (
    EXIT_FAILED,
    EXIT_OK,
    ConfigError,
    ScalebenchError,
    reported,
    unreadable_file_error,
    warn,
)
from scalebench.launch.runner import LaunchRequest, run, run_child
from scalebench.launch.storage import check_writable_folder
from scalebench.results import compare_command


def _fetch(args: argparse.Namespace) -> int:
    from scalebench.data.fetch import fetch_data, fetch_weights

    if not args.weights and not args.data:
        raise ScalebenchError("fetch needs --weights and/or --data NAME")
    lines = fetch_weights(args.allow_unverified, args.manifest) if args.weights else []
    lines += [fetch_data(name, args.cache, args.allow_unverified, args.manifest)
              for name in args.data]
    print("\n".join(lines))
    return EXIT_OK


def _readable_config(path: Path) -> None:
    """Refuse a config file that cannot be read, before any child process starts (the message
    is the one the config reader gives)."""
    try:
        path.open("rb").close()
    except OSError as error:
        raise unreadable_file_error(path, "config", error) from None


def _run(args: argparse.Namespace) -> int:
    from scalebench.launch.requeue import restart_limit_value

    limit = None if args.restart_limit is None else \
        restart_limit_value(args.restart_limit, "--restart-limit")  # before anything is written
    if args.outputs is not None:
        check_writable_folder(args.outputs.resolve(), "--outputs")
    python = shlex.split(args.python) if args.python else [sys.executable]
    if args.runtime or args.image:
        python = _in_container(args)
    else:
        from provenance.process import hand_down_image_digest

        hand_down_image_digest()  # inside a SIF: hashed once, not once per rank
    request = LaunchRequest(args.config, args.benchmark, args.output, args.nproc, args.launcher,
                         args.resume, not args.no_html, python, shlex.split(args.srun_args),
                         args.outputs.resolve() if args.outputs else None, args.argv,
                         args.strict, limit)
    return run(request)


def _in_container(args: argparse.Namespace) -> list[str]:
    """The runtimes helper as the ranks' Python; its variables go to every child."""
    from scalebench.launch.launch_variables import launcher_python
    from scalebench.launch.runtimes import get_runtime

    if not (args.runtime and args.image):
        raise ScalebenchError("--runtime and --image go together: --runtime apptainer|docker|"
                              "podman --image SIF-OR-IMAGE")
    runtime = get_runtime(args.runtime, os.environ.get("SB_ENGINE") or None)
    # The container's working folder is the repository: every path given is made absolute.
    args.config = args.config.resolve()
    args.benchmark = args.benchmark.resolve() if args.benchmark else None
    python, variables = launcher_python(runtime, args.image, {
        "SB_CONFIG": args.config, "SB_BENCHMARK": args.benchmark, "SB_OUTPUTS": args.outputs})
    os.environ.update(variables)
    return python


def _validate(args: argparse.Namespace) -> int:
    config, nproc = args.config, args.nproc
    with tempfile.TemporaryDirectory(prefix="scalebench-validate-") as folder:
        request = LaunchRequest(config, None)
        experiments = json.loads(run_child(request, "expand", str(config), "--world-size",
                                          str(nproc), "--folder", folder, "--check-memory",
                                          "local"))
    from scalebench.launch.resources import experiment_ranks

    counts = sorted({experiment_ranks(e, nproc) for e in experiments})
    print(f"{config}: valid ({len(experiments)} experiment(s); ranks per experiment: "
          f"{', '.join(map(str, counts))})")
    return EXIT_OK


def _plan(args: argparse.Namespace) -> int:
    from scalebench.planning.plan import format_text, make_plan

    allocation_s = _allocation_time(args)  # bad input before the plan's children start
    plan = make_plan(args.config, args.parallel_config, args.nproc, args.benchmark,
                     args.configs, args.strict)
    allocations = None
    if allocation_s is not None:
        from scalebench.planning.allocations import pack_allocations

        allocations = pack_allocations(plan.jobs, allocation_s)
    too_long = allocations.too_long if allocations else []
    if plan.errors or (too_long and args.strict):
        raise ConfigError("\n".join([*plan.errors, *(too_long if args.strict else [])]))
    if args.format == "json":
        print(json.dumps({**plan.to_json(), **({"allocations": allocations.to_json()}
                                               if allocations else {})}, indent=1))
    else:
        print("\n".join([format_text(plan), *(allocations.text() if allocations else [])]))
    for warning in [*plan.warnings(), *too_long]:
        warn(warning)
    return EXIT_OK


def _allocation_time(args: argparse.Namespace) -> float | None:
    """``plan --allocation-time`` in seconds (None: not given); a campaign of ``scalebench
    run``, so refused with --parallel-config (benchopt submits each job on its own)."""
    from scalebench.durations import duration_seconds

    if args.allocation_time is None:
        return None
    seconds = duration_seconds(args.allocation_time, "--allocation-time")
    if args.parallel_config is not None:
        raise ConfigError("--allocation-time plans the allocations of a `scalebench run` "
                          "campaign; with --parallel-config benchopt submits each job as an "
                          "allocation of its own: leave one of them out")
    return seconds


def _capacity(args: argparse.Namespace) -> int:
    from scalebench.durations import duration_seconds
    from scalebench.launch.slurm_requests import memory_bytes
    from scalebench.planning.capacity.calibration import HEADROOM
    from scalebench.planning.capacity.command import capacity

    budget = None if args.memory is None else memory_bytes(args.memory, "--memory",
                                                            bare_unit="B")
    time_budget = None if args.time is None else duration_seconds(args.time, "--time")
    lines = capacity(args.config, budget, args.nproc, args.size_parameter, args.device,
                     args.calibration_size, args.verify, args.parallel_config, args.quick,
                     time_budget)
    if args.format == "json":
        print(json.dumps([line.to_json() for line in lines], indent=1))
    else:
        devices = {line.device for line in lines}
        memory = "device memory" if devices == {"cuda"} else "host memory" \
            if devices <= {"cpu"} else "host memory on the CPU, device memory on CUDA"
        within = f"{args.memory} per rank" if args.memory else "this machine's memory"
        timed = f" and runs within {args.time}" if args.time else ""
        print(f"largest {args.size_parameter} within {within}{timed} ({memory}; "
              f"{HEADROOM:.0%} of it above the process's measured floor kept free):")
        print("\n".join(line.text() for line in lines))
    return EXIT_OK


def _report(args: argparse.Namespace) -> int:
    from scalebench.results.report import write_report

    summary = write_report(args.results, args.output, args.png, args.capacity,
                           args.per_image)
    print(summary)
    return EXIT_OK


def _check(args: argparse.Namespace) -> int:
    from provenance.check import check_results

    results = args.results
    rows, findings = check_results(results)
    for finding in findings:
        print(f"{results}: {finding}")
    if findings:
        print(f"{len(findings)} finding(s) in {rows} rows")
        return EXIT_FAILED
    print(f"{results}: {rows} rows, complete provenance")
    return EXIT_OK


def _rerun(config: Path, benchmark: Path, name: str, nproc: int, outputs: Path) -> None:
    """Run ``config`` as ``scalebench run`` does (replay's re-runs)."""
    from scalebench.launch.runner import LaunchFailed

    request = LaunchRequest(config, benchmark, name, nproc=nproc, html=False, outputs=outputs)
    if run(request) != 0:
        raise LaunchFailed("the replayed run failed; see the messages above")


def _replay(args: argparse.Namespace) -> int:
    from scalebench.results.replay.rerun import replay

    benchmark = args.benchmark.resolve() if args.benchmark else None
    verdicts = replay(args.results, args.rows, args.force, _rerun, benchmark)
    for verdict in verdicts:
        print(verdict.line)
    return EXIT_OK if all(v.status == "MATCH" for v in verdicts) else EXIT_FAILED


def _tune(args: argparse.Namespace) -> int:
    """Arguments checked before optuna is imported: bad input writes nothing."""
    from scalebench.durations import duration_seconds
    from scalebench.tuning.objective import DEFAULT_TRIALS, parse_objective

    budget = None if args.budget is None else duration_seconds(args.budget, "--budget")
    objective = parse_objective(args.objective)
    trials = args.trials if args.trials is not None or budget is not None else DEFAULT_TRIALS
    if args.outputs is not None:
        check_writable_folder(args.outputs.resolve(), "--outputs")
    from scalebench.benchmarks import INFERENCE
    from scalebench.repository import REPO
    from scalebench.tuning.command import TuneRequest, tune

    outputs = args.outputs.resolve() if args.outputs else REPO / INFERENCE.folder / "outputs"
    name = args.output or f"{args.config.stem}_tune"
    request = TuneRequest(args.config, trials, budget, args.workers, objective,
                          outputs / name, args.seed, args.worker)
    return tune(request, args.argv)


def _verify_image(args: argparse.Namespace) -> int:
    from scalebench.launch.images import verify_image

    print(verify_image(args.image, args.digest, args.engine))
    return EXIT_OK


# The function each subcommand runs.
COMMANDS = {"run": _run, "validate": _validate, "plan": _plan, "capacity": _capacity,
            "report": _report, "compare": compare_command.run_compare, "check": _check,
            "replay": _replay, "tune": _tune, "verify-image": _verify_image, "fetch": _fetch}


def main(argv: list[str] | None = None) -> int:
    """Run the subcommand; every error ends in ``scalebench: error:`` lines and the exit
    status of errors.exit_status (2 bad input, 1 failed work, 3 a file system refused a
    write)."""
    args = build_parser().parse_args(argv)
    args.argv = list(sys.argv[1:] if argv is None else argv)  # a stopped run's resume line

    def command() -> int:
        if args.command in ("run", "validate", "plan", "capacity", "tune"):
            _readable_config(args.config)
        return COMMANDS[args.command](args)

    return reported(command)


if __name__ == "__main__":
    sys.exit(main())
