"""One job: ``scalebench run``, the light launcher, running a config's experiments in turn.

It imports only the standard library, so the process that waits for a run holds no torch,
deepinv or problem data; everything that needs them runs in short-lived children (``children``)
or in the ranks (``rank_entry``). For each experiment of the config (one dataset x solver
parameter combination) in turn, it starts the ranks in a staging folder, then publishes the
results file with every experiment finished so far (atomically, marked partial until the
last one). A failing experiment is recorded (experiment, rank, error: ``failures`` tells
which rank failed first and how) and the others still run. SIGTERM / SIGINT stop the
running experiment, keep what finished (marked partial) and remove the staging folder;
``--resume`` runs only the experiments a partial file lacks, and so does a requeued SLURM job
by itself (``resume``: one rule for both; a complete file has nothing left to run). A write
refused by a full, over-quota or read-only file system stops the launch at once, in one line
(``storage``). Under srun, a step that does not end ``grace_s``
after a rank's failure (a node lost) is ended, and the launch stops there: the allocation
cannot run the next experiment. A rank found hung (``liveness``: silent, or its progress
stalled) fails its experiment at once, and under srun stops the launch the same way. Under
srun, an experiment whose predicted time does not fit what is left of the job's time is not
started; a launch cut so, or by a lost node or the time limit's SIGTERM, requeues its own
job within the restart limit (``requeue``), and the next start resumes.

Before any rank starts, each experiment whose timeout is below its predicted run (computed by
the expand child, as ``plan`` predicts it) is named in a warning; with ``strict``, refused
(exit 2, nothing run).

Exit status: 0 all experiments finished (a complete file resumed: none left); 1 some failed
(the file keeps the others, or none is written when none finished); 2 bad input; 3 a file
system refused a write; 128 + signal number when stopped by a signal.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from scalebench.errors import (
    EXIT_BAD_INPUT,
    EXIT_FAILED,
    EXIT_OK,
    EXIT_STORAGE_FULL,
    WARNING_PREFIX,
    CommandFailed,
    ScalebenchError,
    StorageFull,
    is_storage_error,
)
from scalebench.launch import failures, liveness, processes, requeue
from scalebench.launch.failures import experiment_failure, failure_message, lost_step_message
from scalebench.launch.resources import (
    check_allocation,
    experiment_ranks,
    experiment_solver_params,
    srun_resources,
)
from scalebench.launch.resume import finished_before, slurm_restart
from scalebench.launch.storage import check_writable_folder, rank_storage_fault, stopped_launch
from scalebench.repository import REPO

ERROR_PREFIX = "scalebench: error: "  # how children print each problem (errors.error_lines)


class LaunchFailed(CommandFailed):
    """The launch did not finish every experiment; the message says what happened."""


@dataclass
class LaunchRequest:
    """One launch: a `scalebench run` of a config, its experiments run one after the other."""

    config: Path
    benchmark: Path | None  # None: the repository's folder for the config's objective
    output: str | None = None  # result name; default <config stem>_<date-time>
    nproc: int = 1  # local ranks (launcher "local")
    launcher: str = "local"  # "local" or "srun" (inside a SLURM allocation)
    resume: bool = False
    html: bool = True
    python: list[str] = field(default_factory=lambda: [sys.executable])
    srun_args: list[str] = field(default_factory=list)
    outputs: Path | None = None  # results folder; default <benchmark>/outputs
    argv: list[str] = field(default_factory=list)  # the command's arguments ("run", ...)
    strict: bool = False  # a timeout below an experiment's predicted run: an error, not a warning
    restart_limit: int | None = None  # the launcher's own requeues; None: the config's


@dataclass
class LaunchState:
    """What the launcher knows while a launch (one `scalebench run`) goes on."""

    final: Path
    staging: Path
    parts: list[tuple[str, Path]] = field(default_factory=list)
    failures: list[dict] = field(default_factory=list)
    finished: int = 0  # experiments of this launch published
    stopped_by: int | None = None  # signal number
    group: processes.RankGroup | None = None
    # (status, unfinished recorded) of the final file's last publish: what is already there.
    published: tuple[str, int] | None = None
    unfinished: dict[str, dict] = field(default_factory=dict)  # id: how a failed/stopped one ended
    # The final file's closing lines (best quality per dataset, radio against a blank sky).
    closing: str = ""
    lost: str = ""  # why the allocation cannot go on (a node lost): the launch stops
    # Per experiment: its timeout and the one its prediction needs (expand --predict-time).
    time_limits: dict[str, dict] = field(default_factory=dict)
    cut: requeue.Cut | None = None  # why this allocation cannot go on: the job requeues
    requeues: dict | None = None  # this job's requeues by the launcher (its run status)


def run_child(request: LaunchRequest, *args: str) -> str:
    """Run a child (``scalebench.launch.children``); its stdout, or ScalebenchError with its
    one-line error."""
    result = subprocess.run([*request.python, "-m", "scalebench.launch.children", *args],
                            capture_output=True, text=True, check=False)
    if result.returncode != 0:
        lines = [line for line in result.stderr.splitlines() if line.strip()]
        named = [line.removeprefix(ERROR_PREFIX) for line in lines
                 if line.startswith(ERROR_PREFIX)]  # every problem the step names
        message = "\n".join(named) if named else lines[-1] if lines else \
            f"step '{args[0]}' failed ({result.returncode})"
        error = {EXIT_BAD_INPUT: ScalebenchError, EXIT_STORAGE_FULL: StorageFull}.get(
            result.returncode, LaunchFailed)
        raise error(message)
    for line in result.stderr.splitlines():  # e.g. an old parameter name: the user's to see
        if line.startswith(WARNING_PREFIX):
            print(line, file=sys.stderr, flush=True)
    return result.stdout


def world_size(request: LaunchRequest) -> int:
    if request.launcher == "srun":
        return int(os.environ.get("SLURM_NTASKS", "0")) or _missing_allocation()
    return request.nproc


def _missing_allocation() -> int:
    raise ScalebenchError("--launcher srun needs a SLURM allocation (SLURM_NTASKS is unset); "
                          "submit with sbatch slurm_templates/multinode.sh or use --nproc")


def result_path(request: LaunchRequest) -> Path:
    name = request.output or f"{request.config.stem}_{datetime.now():%Y-%m-%d_%H%M%S}"
    if not name or os.sep in name or name.startswith("."):
        raise ScalebenchError(f"--output must be a plain file name without '{os.sep}' or a "
                              f"leading dot, got {name!r}")
    folder = request.outputs or request.benchmark / "outputs"
    return folder / f"{name.removesuffix('.parquet')}.parquet"


def run(request: LaunchRequest) -> int:
    """Validate, run every experiment, publish; return the exit status."""
    liveness.silence_bound_s()  # a bad bound is bad input, before anything is written
    given = ("--benchmark", str(request.benchmark)) if request.benchmark else ()
    # The child names the config's folder, and refuses a given one of another objective.
    named = run_child(request, "benchmark", str(request.config.resolve()), *given).strip()
    request.benchmark = request.benchmark.resolve() if request.benchmark else REPO / named
    if not (request.benchmark / "objective.py").is_file():
        raise ScalebenchError(f"benchmark folder {request.benchmark} has no objective.py")
    final = result_path(request)
    check_writable_folder(final.parent, "--outputs" if request.outputs else "results")
    resumed = finished_before(final, request.config, lambda path: json.loads(
        run_child(request, "status", str(path))), request.resume, slurm_restart())
    if resumed.complete:  # nothing left to run, nothing re-run
        return EXIT_OK
    done = resumed.experiments
    created = not final.parent.exists()  # removed again if the run leaves nothing in it
    final.parent.mkdir(parents=True, exist_ok=True)
    _remove_stale_staging(final)
    # Same file system as the results, so that publishing is an atomic rename.
    staging = Path(tempfile.mkdtemp(prefix=f".staging-{final.stem}-", dir=final.parent))
    state = LaunchState(final, staging)
    previous = {sig: signal.signal(sig, lambda signum, _: _stop(state, signum))
                for sig in (signal.SIGTERM, signal.SIGINT)}
    experiments: list[dict] = []  # their number goes into a full disk's line
    try:
        experiments = json.loads(run_child(request, "expand", str(request.config.resolve()),
                                       "--world-size", str(world_size(request)),
                                       "--folder", str(staging / "configs"),
                                       "--benchmark", str(request.benchmark),
                                       "--check-devices", "--predict-time",
                                       *_memory_check(request)))
        if request.launcher == "srun":
            check_allocation(experiments, world_size(request))
        todo = [e for e in experiments if e["id"] not in done]
        _check_time_limits(request, todo)
        state.time_limits = {e["id"]: e["time"] for e in todo if e.get("time")}
        srun = request.launcher == "srun"
        if srun and requeue.job_id():  # earlier requeues; a start on a node they excluded
            state.requeues, state.cut = requeue.at_start(final.with_suffix(""))
        for index, experiment in enumerate(todo):
            state.cut = state.cut or (requeue.experiment_cut(experiment) if srun else None)
            if state.stopped_by is not None or state.lost or state.cut:
                break
            _run_experiment(request, state, experiment, f"{index + 1}/{len(todo)}",
                            last=index == len(todo) - 1)
        return _conclude(request, state, len(experiments), len(todo),
                         requeue.restart_limit(request.restart_limit, experiments))
    except (StorageFull, OSError) as error:
        if isinstance(error, OSError) and not is_storage_error(error):
            raise
        argv = request.argv or ["run", str(request.config)]
        raise stopped_launch(error, final, len(experiments), argv, lambda: json.loads(
            run_child(request, "status", str(final)))) from None
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        shutil.rmtree(staging, ignore_errors=True)
        if created and not any(final.parent.iterdir()):
            final.parent.rmdir()


def _memory_check(request: LaunchRequest) -> list[str]:
    """The expand option that refuses experiments too large for this machine, for a local
    run (whose ranks all run here)."""
    return ["--check-memory", "all"] if request.launcher == "local" else []


def _stop(state: LaunchState, signum: int) -> None:
    state.stopped_by = signum
    if state.group is not None:
        state.group.signal(signum)


def _remove_stale_staging(final: Path) -> None:
    """Staging folders of this result left by a launcher that was killed outright."""
    for stale in final.parent.glob(f".staging-{final.stem}-*"):
        shutil.rmtree(stale, ignore_errors=True)


def _run_experiment(request: LaunchRequest, state: LaunchState, experiment: dict,
                    position: str, last: bool) -> None:
    """Run one experiment (``position``: k/N in this launch) on its ranks; publish its
    results (the run complete when it is the ``last`` and all went well), or record and print
    its failure in one line."""
    folder = state.staging / experiment["id"]
    folder.mkdir()
    config = Path(experiment["config"])
    print(f"[scalebench] experiment {position} ({experiment['id']}): {experiment['label']}",
          flush=True)
    if request.launcher == "srun":
        index = int(position.split("/")[0]) - 1
        port = processes.step_port(os.environ.get("SLURM_JOB_ID"), index)
        resources = srun_resources(experiment_solver_params(experiment))
        state.group = processes.start_srun(request.python, folder, request.benchmark, config,
                                           [*request.srun_args, *resources], port, position,
                                           liveness.Bounds.of(experiment))
    else:
        ranks = experiment_ranks(experiment, request.nproc)
        state.group = processes.start_local(request.python, ranks, folder, request.benchmark,
                                            config, position, liveness.Bounds.of(experiment))
    group, statuses = state.group, state.group.wait()
    state.group = None
    logs = state.final.with_suffix("") / "logs"
    _keep_artefacts(folder, state.final.with_suffix(""), experiment["id"])
    fault = rank_storage_fault(folder, position, experiment["id"], statuses,
                               request.launcher == "local", state.final)
    if fault is not None and state.stopped_by is None:
        raise fault  # every later experiment would fail the same way
    result = folder / "result.parquet"
    if all(s == 0 for s in statuses) and result.is_file():
        state.parts.append((experiment["id"], result))
        _publish(request, state, _run_status(state) if last else "partial")
        state.finished += 1
    elif state.stopped_by is None:
        failure = experiment_failure(folder, experiment, group, request.launcher == "local")
        state.failures.append(failure)
        state.unfinished[experiment["id"]] = failures.unfinished_stop(folder, stopped=False)
        rank = "*" if failure["rank"] is None else failure["rank"]
        log = logs / f"{experiment['id']}.rank{rank}.log"
        if request.launcher == "local" and statuses[0] < 0 and sys.stdout.isatty():
            print(flush=True)  # rank 0 was killed before it could end its progress line
        print(failure_message(failure, position, log), file=sys.stderr, flush=True)
        if request.launcher == "srun" and group.forced:  # would not end by itself, or hung
            state.lost = lost_step_message(failure, group, state.final)
            print(state.lost, file=sys.stderr, flush=True)
            host = group.hung.host if group.hung is not None else failure["host"]
            state.cut = requeue.Cut(state.lost.removeprefix("[scalebench] stopped: "), host)
    else:  # the signal that stops the launch stopped this experiment
        state.unfinished[experiment["id"]] = failures.unfinished_stop(folder, stopped=True)


def _check_time_limits(request: LaunchRequest, todo: list[dict]) -> None:
    """``plan``'s warning for each experiment whose timeout is below its predicted run with
    the margin (computed by the expand child: planning.plan_time.launch_time_checks), before
    any rank starts; with ``strict``, an error instead (exit 2, nothing run)."""
    warnings = [e["time"]["warning"] for e in todo if (e.get("time") or {}).get("warning")]
    if warnings and request.strict:
        raise ScalebenchError("\n".join(warnings))
    for warning in warnings:
        print(WARNING_PREFIX + warning, file=sys.stderr, flush=True)


def _keep_artefacts(folder: Path, destination: Path, identifier: str) -> None:
    """Per-run artefacts (traces) of every rank and the rank logs, into the result folder."""
    sources = [folder / "result", *sorted(folder.glob("rank*/result"))]
    for source in sources:
        for path in sorted(p for p in source.rglob("*") if p.is_file()):
            target = destination / path.relative_to(source)
            target.parent.mkdir(parents=True, exist_ok=True)
            os.replace(path, target)
    for log in sorted(folder.glob("rank*.log")):
        target = destination / "logs" / f"{identifier}.{log.name}"
        target.parent.mkdir(parents=True, exist_ok=True)
        os.replace(log, target)


def _publish(request: LaunchRequest, state: LaunchState, status: str) -> None:
    args = ["publish", "--final", str(state.final), "--status", status,
            "--failures", json.dumps(state.failures), "--config", str(request.config),
            "--stops", json.dumps(state.unfinished),
            "--time-limits", json.dumps(state.time_limits),
            *(["--requeues", json.dumps(state.requeues)] if state.requeues else [])]
    for identifier, part in state.parts:
        args += ["--part", f"{identifier}={part}"]
    reply = json.loads(run_child(request, *args))
    state.closing = reply["closing"]
    state.parts.clear()  # now in the final file
    state.published = (status, len(state.unfinished))


def _run_status(state: LaunchState) -> str:
    """The status of a run whose experiments are all done or stopped: complete when none
    failed, no signal stopped it and none was left for the next allocation (``cut``)."""
    done = not state.failures and state.stopped_by is None and state.cut is None
    return "complete" if done else "partial"


def _conclude(request: LaunchRequest, state: LaunchState, total: int, todo: int,
              restart_limit: int) -> int:
    finished = state.finished
    status = _run_status(state)
    if state.final.is_file():
        if state.published != (status, len(state.unfinished)):  # not in the file yet
            _publish(request, state, status)
    elif state.failures or state.stopped_by is not None:
        print("[scalebench] no experiment finished; no result file was written",
              file=sys.stderr)
    if request.launcher == "srun":  # cut: a node lost, a rank hung, out of time
        requeue.after_launch(state.cut, state.stopped_by, state.final.with_suffix(""),
                             restart_limit, bool(state.lost), progressed=finished > 0)
    if state.stopped_by is not None:
        name = signal.Signals(state.stopped_by).name
        print(f"[scalebench] stopped by {name}: {finished} of {todo} experiment(s) of this "
              f"launch finished; partial results in {state.final}; complete them with "
              f"--resume --output {state.final.stem}", file=sys.stderr)
        return 128 + state.stopped_by
    if not state.final.is_file():
        return EXIT_FAILED if state.failures or state.cut else EXIT_OK
    print(f"Results: {state.final} ({total - todo + finished} of {total} experiment(s))")
    if state.closing:
        print(state.closing)
    if request.html:
        report = run_child(request, "render", str(state.final))
        print(f"Report: {report.strip().splitlines()[-1]}")
    if state.failures or state.cut:  # each printed when it happened; some left to run
        return EXIT_FAILED
    return EXIT_OK
