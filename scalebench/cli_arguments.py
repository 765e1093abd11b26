"""The ``scalebench`` command line's arguments: one parser (``build_parser``) with one
subcommand each, what each does at length (``DESCRIPTIONS``: its --help and docs/cli.md, which
docs/generate.py builds from this parser), and the argument types they share. Standard library
only, like scalebench.cli, which runs the subcommands.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from scalebench import __version__
from scalebench.results import compare_command

PROGRAM = "The scalebench command line: run, plan, size, report, compare and replay experiments"


def positive_int(text: str) -> int:
    """An argument that counts something (ranks, repeats): a whole number of at least 1."""
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {text!r}")
    return value


def worker_count(text: str) -> int:
    """``tune --workers``: local worker processes, 0 for none (the outputs of trials that
    workers elsewhere ran: SLURM tasks with --worker)."""
    try:
        value = int(text)
    except ValueError:
        value = -1
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be a whole number of at least 0, got {text!r}")
    return value


# What each subcommand does, at length (its --help and docs/cli.md).
DESCRIPTIONS = {
    "run": "Validate the whole experiment file, then run each of its experiments (locally on "
           "--nproc ranks, or with --launcher srun across a SLURM allocation), publishing the "
           "results parquet atomically after each and the HTML report at the end; --resume "
           "completes a partial run; --runtime with --image runs the ranks in a container.",
    "validate": "Check an experiment file for --nproc ranks and exit: every problem one line.",
    "plan": "Every job of an experiment with its resources, memory per rank, predicted wall "
            "time (from the time model `scalebench capacity` calibrates) and command, and the "
            "campaign's GPU- and CPU core-hours at the time limits and predicted; every "
            "problem one line, before anything is submitted.",
    "capacity": "The largest size of each configuration whose predicted per-rank peak fits "
                "the memory budget (and, with --time, whose predicted run fits the time "
                "budget), from memory and time models calibrated by the same short real runs, "
                "then refined by runs near the answer until they are predicted within 10 % "
                "(--quick: no refinement; one line per configuration and rank count).",
    "tune": "Search each pnp method's declared parameters (or those the config's tune: "
            "section names) on the problem's validation images, one optuna study per "
            "configuration, stopping hopeless trials inside their loop (pruned); then one "
            "results parquet of every trial and the tuned config, which `scalebench run` "
            "scores on the test images. The same --output resumes a tuning.",
    "report": "Merge results files into one self-contained HTML page (no network request): "
              "quality, per-step time, memory, capacity, scaling, images and provenance.",
    "compare": compare_command.DESCRIPTION,
    "check": "Check that every row of a results file has complete provenance of the right "
             "types (exit 0 good, 1 findings, 2 unreadable).",
    "replay": "Re-run the runs of archived rows (one per config, repetition and world size) "
              "and compare them bit for bit (exit 0 when every run matches).",
    "verify-image": "Check that a container image is the one rows recorded, before a replay "
                    "(exit 0 it is, 1 another image, 2 bad input).",
    "fetch": "Download and verify the pretrained weights (into the torch hub cache) and data "
             "sets (into the scalebench cache) the manifest lists.",
}


def build_parser() -> argparse.ArgumentParser:
    """The parser of every subcommand."""
    parser = argparse.ArgumentParser(
        prog="scalebench", description=f"{PROGRAM} (scalebench {__version__})")
    parser.add_argument("--version", action="version", version=f"scalebench {__version__}")
    commands = parser.add_subparsers(dest="command", required=True)

    def command(name: str, summary: str) -> argparse.ArgumentParser:
        return commands.add_parser(name, help=summary, description=DESCRIPTIONS[name])

    run_parser = command("run", "validate and run an experiment file")
    run_parser.add_argument("config", type=Path, help="experiment YAML file (see configs/)")
    run_parser.add_argument("--benchmark", type=Path,
                            help="benchopt benchmark folder (default: the repository's folder "
                            "for the objective the config names)")
    run_parser.add_argument("--output", help="result name: <benchmark>/outputs/<name>.parquet "
                            "(default: <config name>_<date-time>); never overwrites")
    run_parser.add_argument("--outputs", type=Path, default=None,
                            help="results folder (default: <benchmark>/outputs)")
    run_parser.add_argument("--no-html", action="store_true", help="skip the HTML report")
    run_parser.add_argument("--nproc", type=positive_int, default=1,
                            help="ranks on this machine (default 1)")
    run_parser.add_argument("--launcher", choices=("local", "srun"), default="local",
                            help="local processes, or one srun step per experiment inside a "
                            "SLURM allocation (ranks = the allocation's tasks)")
    run_parser.add_argument("--resume", action="store_true",
                            help="complete the result named by --output: run only the "
                            "experiments it lacks (of a complete one: none, exit 0); a "
                            "requeued SLURM job does it by itself")
    run_parser.add_argument("--strict", action="store_true",
                            help="a timeout below an experiment's predicted run with a 20 %% "
                            "margin (as `scalebench plan` predicts it) is an error and nothing "
                            "runs (default: a warning before the run starts)")
    run_parser.add_argument("--restart-limit", default=None, metavar="N",
                            help="how many times a launch under srun may requeue its own job "
                            "(a node lost or hung, the next experiment not fitting the job's "
                            "time, the time limit's SIGTERM) (default: the config's "
                            "restart-limit, 3)")
    interpreter = run_parser.add_mutually_exclusive_group()
    interpreter.add_argument("--python", default=None,
                             help="command that runs Python with the benchmark's stack, for "
                             "the ranks and the launcher's children (default: "
                             "this interpreter), e.g. 'slurm_templates/task-python.sh'")
    interpreter.add_argument("--runtime", choices=("apptainer", "docker", "podman"),
                             help="run the launcher's children and the ranks inside --image (GPUs, "
                             "binds "
                             "and engine options: the SB_* variables of "
                             "scalebench.launch.launch_variables)")
    run_parser.add_argument("--image", help="SIF file (apptainer) or image (docker, podman)")
    run_parser.add_argument("--srun-args", default="",
                            help="extra srun options for every experiment's step")
    validate = command("validate", "check an experiment file and exit")
    validate.add_argument("config", type=Path, help="experiment YAML file")
    validate.add_argument("--nproc", type=positive_int, default=1, help="ranks to check for")
    plan = command("plan", "list and check every job of an experiment "
                               "before submitting it")
    plan.add_argument("config", type=Path, help="experiment YAML file")
    plan.add_argument("--parallel-config", type=Path, default=None,
                      help="benchopt submitit parallel config (e.g. configs/scaling/"
                      "submitit.yml): jobs are planned as benchopt would submit them")
    plan.add_argument("--nproc", type=positive_int, default=1,
                      help="ranks of a local run for experiments that set none (default 1)")
    plan.add_argument("--format", choices=("text", "json"), default="text",
                      help="a table (default) or JSON")
    plan.add_argument("--configs", type=Path, default=None,
                      help="write each job's one-run config here; its command then runs it alone")
    plan.add_argument("--strict", action="store_true",
                      help="a time limit below a job's predicted wall time with a 20 %% "
                      "margin is an error (default: a warning)")
    plan.add_argument("--benchmark", type=Path,
                      help="benchopt benchmark folder (default: the repository's folder for "
                      "the objective the config names)")
    plan.add_argument("--allocation-time", default=None, metavar="DURATION",
                      help="a SLURM job's time limit, e.g. 4h or 04:00:00: how many "
                      "allocations of it `scalebench run` needs (requeueing itself between "
                      "them), experiments packed in order with a 20 %% margin, none split; "
                      "one longer than an allocation is a warning (an error with --strict)")
    capacity = command("capacity", "the largest size of each configuration "
                                   "whose predicted per-rank peak fits a memory budget")
    capacity.add_argument("config", type=Path, help="experiment YAML file")
    capacity.add_argument("--memory", default=None,
                          help="budget per rank, e.g. 80GiB (device memory with --device cuda, "
                          "host memory on the CPU; default with --time: this machine's)")
    capacity.add_argument("--time", default=None, metavar="DURATION",
                          help="time budget of one run (set-up, max_iter iterations and its "
                          "evaluations), e.g. 2h, 90m or 1:30:00: the answer's predicted run "
                          "fits it too, and the line says which budget binds")
    capacity.add_argument("--device", choices=("cpu", "cuda"), default=None,
                          help="device of the runs (default: each solver's own)")
    ranks = capacity.add_mutually_exclusive_group()
    ranks.add_argument("--nproc", type=positive_int, default=1,
                       help="ranks of experiments that set none (default 1)")
    ranks.add_argument("--parallel-config", type=Path, default=None,
                       help="benchopt submitit parallel config: ranks as the jobs would ask "
                       "for them (its slurm_nodes x slurm_ntasks_per_node under the solver's)")
    capacity.add_argument("--size-parameter", default="image_size",
                          help="the dataset parameter that sets the size (default image_size)")
    capacity.add_argument("--calibration-size", type=positive_int, default=128,
                          help="largest size probed to calibrate (default 128; probes at a "
                          "quarter, half, three quarters of it and at it)")
    capacity.add_argument("--format", choices=("text", "json"), default="text",
                          help="a table (default) or JSON, with what the report's capacity "
                          "view draws")
    capacity.add_argument("--verify", action="store_true",
                          help="run the largest predicted size of each one-rank line once, "
                          "whole (no repetition cut as in the probes), and print its "
                          "predicted and measured peak, seconds per iteration and set-up, "
                          "and their ratios")
    capacity.add_argument("--quick", action="store_true",
                          help="calibrate at the small sizes only, without probing near the "
                          "answer: faster, a bound (high by up to 2x far from the probes)")
    report = command("report", "one offline HTML page of merged results")
    report.add_argument("results", type=Path, nargs="+", help="results parquet files")
    report.add_argument("-o", "--output", type=Path, default=Path("report.html"),
                        help="HTML file to write (default: report.html)")
    report.add_argument("--png", type=Path, default=None,
                        help="also write every figure as a PNG file into this folder")
    report.add_argument("--capacity", type=Path, action="append", default=[], metavar="FILE",
                        help="answers of `scalebench capacity --format json` for the capacity "
                        "view (repeatable)")
    report.add_argument("--per-image", action="store_true",
                        help="a configuration run on several images: one line per image, "
                        "not its mean, standard deviation and lowest-highest over them")
    compare_command.add_arguments(command("compare", compare_command.SUMMARY))
    tune_parser = command("tune", "tune each method on validation images")
    tune_parser.add_argument("config", type=Path, help="experiment YAML file (see configs/)")
    tune_parser.add_argument("--trials", type=positive_int, default=None,
                             help="ended trials (complete and pruned) per study (default 20 "
                             "without --budget)")
    tune_parser.add_argument("--budget", default=None, help="wall time after which no trial "
                             "starts, a duration (90min, 2h, 01:30:00)")
    tune_parser.add_argument("--workers", type=worker_count, default=1,
                             help="local worker processes sharing the studies (default 1; 0: "
                             "run no trial, write the outputs of the trials the studies hold)")
    tune_parser.add_argument("--objective", default="quality",
                             help="'quality' (the mean best headline quality within max_iter) "
                             "or 'time-to:DB' (the mean solver time to DB dB)")
    tune_parser.add_argument("--seed", type=int, default=0, help="the sampler's seed")
    tune_parser.add_argument("--output", help="tuning name: <outputs>/<name>/ (journals, "
                             "trials), <name>.parquet, <name>.yml (default: <config "
                             "name>_tune); the same name resumes")
    tune_parser.add_argument("--outputs", type=Path, default=None,
                             help="folder (default: benchmark_inference/outputs)")
    tune_parser.add_argument("--worker", type=int, default=None, metavar="INDEX",
                             help="run the trial loop only, as worker INDEX (SLURM tasks: "
                             "srun ... --worker $SLURM_PROCID; then the same command with "
                             "--workers 0 writes the outputs)")
    check = command("check", "check the provenance of a results file")
    check.add_argument("results", type=Path, help="results parquet file")
    replay = command("replay", "re-run archived results, compare bit for bit")
    replay.add_argument("results", type=Path, help="results parquet file")
    replay.add_argument("--rows", help="rows whose experiments to replay, e.g. '0,4-7' "
                        "(default: all)")
    replay.add_argument("--force", action="store_true", help="replay even where the "
                        "environment differs, comparing within a tolerance")
    replay.add_argument("--benchmark", type=Path, help="benchopt benchmark folder (default: "
                        "the one each result row's stored config names)")
    verify = command("verify-image", "check a container image's digest before a replay")
    verify.add_argument("image", help="SIF file, or image name/ID known to the engine")
    verify.add_argument("--digest", required=True, help="expected digest, sha256:HEX")
    verify.add_argument("--engine", default=os.environ.get("SCALEBENCH_ENGINE", "docker"),
                        help="docker or podman, with global options")
    fetch = command("fetch", "download and verify weights and data sets")
    fetch.add_argument("--weights", action="store_true",
                       help="every pretrained weights file (into $TORCH_HOME/hub/checkpoints)")
    fetch.add_argument("--data", action="append", default=[], metavar="NAME",
                       help="a data set (repeatable), e.g. walnut")
    fetch.add_argument("--cache", type=Path, default=None,
                       help="data cache folder (default: $SCALEBENCH_CACHE, else "
                       "$XDG_CACHE_HOME/scalebench, else ~/.cache/scalebench)")
    fetch.add_argument("--allow-unverified", action="store_true",
                       help="accept files whose checksum the manifest does not know, recording "
                       "their sha256 as they arrive")
    fetch.add_argument("--manifest", type=Path, default=None,
                       help="manifest to read instead of the packaged one (e.g. a mirror's)")
    return parser
