"""``scalebench tune CONFIG``: each pnp method of the config searched on the validation images,
one study per configuration, by one worker here or by ``--workers N`` local processes (or
SLURM tasks running ``--worker``) sharing the studies; then the results parquet of every
trial and the tuned config beside it.

The tuning's files live in ``<outputs>/<name>/`` (the studies' journals, the workers'
heartbeats, each trial's config and results); the same ``--output`` resumes a tuning of the
same config, redoing none of its ended trials, and another config's is refused.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from scalebench.errors import ConfigError, ScalebenchError
from scalebench.launch.resume import same_config
from scalebench.tuning.objective import Objective
from scalebench.tuning.search import Search, searches
from scalebench.tuning.worker import WorkerPlan, run_worker

RECORD = "tuning.json"  # the tuning's own record in its folder: which config it tunes


@dataclass(frozen=True)
class TuneRequest:
    """One ``scalebench tune``, its arguments checked."""

    config: Path
    trials: int | None
    budget_s: float | None
    workers: int
    objective: Objective
    folder: Path  # <outputs>/<name>
    seed: int = 0
    worker: int | None = None  # a worker process only: its index


def plan_searches(request: TuneRequest) -> tuple[dict, dict, list[Search]]:
    """The config as read, its run options and the studies it asks for."""
    from scalebench.experiment.config import check_config, read_config
    from scalebench.experiment.expand import expand_config

    raw = read_config(request.config)
    config = check_config(raw, request.config)
    with tempfile.TemporaryDirectory(prefix="scalebench-tune-") as scratch:
        experiments = expand_config(config, Path(scratch))
    found = searches(experiments, config.scalebench.get("tune"))
    if not found:
        raise ConfigError(f"{request.config}: no pnp solver to tune (tuning searches the "
                          f"declared spaces of pnp's algorithms)")
    if len({json.dumps(s.dataset, sort_keys=True, default=str) for s in found}) > 1:
        raise ConfigError(f"{request.config}: tune one dataset configuration at a time (the "
                          f"tuned config runs every method on every dataset listed)")
    options = experiments[0]["options"] if experiments else {}
    return raw, options, found


def claim_folder(request: TuneRequest) -> None:
    """The tuning folder for this config: created, or resumed when it holds this config's
    tuning; another config's is refused (nothing written)."""
    record = request.folder / RECORD
    if record.is_file():
        written_by = json.loads(record.read_text()).get("config")
        if not same_config(written_by, request.config):
            raise ScalebenchError(f"tuning {request.folder} holds config {written_by}, not "
                                  f"{request.config}; give another --output")
        print(f"[scalebench] tune: resuming {request.folder}", flush=True)
        return
    request.folder.mkdir(parents=True, exist_ok=True)
    record.write_text(json.dumps({"config": str(request.config.resolve())}))


def tune(request: TuneRequest, argv: list[str]) -> int:
    """Run the tuning ``request`` asks for; its exit status."""
    raw, options, found = plan_searches(request)
    claim_folder(request)
    plan = WorkerPlan(found, request.folder, options, request.objective, request.trials,
                      request.budget_s, request.seed, request.worker or 0)
    if request.worker is not None:
        run_worker(plan)
        return 0
    if request.workers > 1:
        _run_workers(request, argv)
    elif request.workers == 1:
        run_worker(plan)
    return write_outputs(request, raw, found)


def _run_workers(request: TuneRequest, argv: list[str]) -> None:
    """``--workers N`` local processes running the worker loop, waited for."""
    processes = [subprocess.Popen([sys.executable, "-m", "scalebench", *argv, "--worker",
                                   str(index)], env=os.environ.copy())
                 for index in range(request.workers)]
    failed = [index for index, process in enumerate(processes) if process.wait() != 0]
    if failed:
        raise ScalebenchError(f"tune: worker(s) {', '.join(map(str, failed))} failed; the "
                              f"ended trials are kept, run the same command to resume")


def write_outputs(request: TuneRequest, raw: dict, found: list[Search]) -> int:
    """The results parquet and the tuned config of the tuning; a summary per study."""
    from scalebench.tuning.outputs import merge_results, tuned_config, write_tuned_config
    from scalebench.tuning.study import StudyFiles, open_study

    studies = [(search, open_study(StudyFiles(request.folder, search.key), request.seed, 0))
               for search in found]
    results = request.folder.with_suffix(".parquet")
    rows = merge_results(results, studies, request.folder / "trials", request.config)
    complete = [(s, study) for s, study in studies if _has_complete(study)]
    print(f"[scalebench] tune: {rows} rows of every trial in {results}", flush=True)
    for search, study in studies:
        print(f"[scalebench] tune {search.label}: {_summary(study)}", flush=True)
    if len(complete) < len(studies):
        print("[scalebench] tune: a study has no complete trial; no tuned config written",
              file=sys.stderr, flush=True)
        return 1
    tuned = request.folder.with_suffix(".yml")
    write_tuned_config(tuned, tuned_config(raw, studies, results), request.config)
    print(f"[scalebench] tune: tuned config {tuned} (runs the test images: scalebench run "
          f"{tuned})", flush=True)
    return 0


def _has_complete(study) -> bool:
    from optuna.trial import TrialState

    return bool(study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,)))


def _summary(study) -> str:
    from optuna.trial import TrialState

    trials = study.get_trials(deepcopy=False)
    count = {state: sum(t.state == state for t in trials) for state in TrialState}
    best = f"best {study.best_value:.4g} at {study.best_params}" if _has_complete(study) \
        else "no complete trial"
    return (f"{len(trials)} trial(s): {count[TrialState.COMPLETE]} complete, "
            f"{count[TrialState.PRUNED]} pruned, {count[TrialState.FAIL]} failed; {best}")
