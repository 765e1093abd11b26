# Shared body of the batch templates (sourced by multinode.sh, singlenode.sh and tune.sh).
#
# Options (environment variables, e.g. `sbatch --export=ALL,SB_CONFIG=... multinode.sh`):
#   SB_CONFIG       experiment YAML (required), relative to SB_REPO or absolute
#   SB_OUTPUT       result name (default: <config name>_<job id>)
#   SB_RESUME       1: complete the partial result SB_OUTPUT
#   SB_HTML         0: skip benchopt's HTML report
#   SB_RESTART_LIMIT  how many times the launch may requeue its own job (--restart-limit;
#                   default: the config's restart-limit, 3)
#   SB_RUNTIME      none (host venv), apptainer, docker or podman (default none)
#   SB_IMAGE        SIF file (apptainer) or image name (docker, podman)
#   SB_ENGINE       docker / podman command with global options (default: SB_RUNTIME)
#   SB_IMAGE_DIGEST, SB_IMAGE_LABELS_JSON  docker / podman: the image's ID and labels, handed
#                   to provenance (default: resolved once per job with `image inspect`);
#                   apptainer: the SIF's digest (default: taken once per job, not per rank)
#   SB_REPO         the repository (default: the folder sbatch was called from)
#   SB_BENCHMARK    benchmark folder (default: SB_REPO/benchmark_inference)
#   SB_OUTPUTS      results folder (default: SB_BENCHMARK/outputs), also holding
#                   <name>.preflight.json; bound into containers
#   SB_GPUS         1: one GPU per task (--gpus-per-task=1, --nv / --gpus) (default 0)
#   SB_DATA, SB_WEIGHTS  folders bound at their own paths (SB_WEIGHTS becomes TORCH_HOME)
#   SB_BINDS        more binds, comma-separated SRC:DST[:OPTIONS]
#   SB_PYTHON       the interpreter (default: SB_REPO/.venv/bin/python, `python` in images)
#   SB_LAUNCHER_PYTHON  host python for the launcher (default: the venv's for none, else
#                   python3; the launcher needs only the standard library)
#   SB_DRY_RUN      1: print the commands instead of running them
# Resources come from sbatch itself (--nodes, --ntasks-per-node, --time, --gpus-per-node...).
# The templates never call sbatch from inside a container.

sb_main() {
  set -euo pipefail
  sb_setup "$SLURM_JOB_ID"
  export MASTER_ADDR=${MASTER_ADDR:-$(sb_rank_env master-addr)}
  export SCALEBENCH_PREFLIGHT=$SB_OUTPUTS/$SB_OUTPUT.preflight.json
  local task=$SB_REPO/slurm_templates/task-python.sh
  local srun_args=()
  [ "$SB_GPUS" = 1 ] && srun_args+=(--gpus-per-task=1)

  echo "[scalebench] job $SLURM_JOB_ID: $SLURM_NTASKS task(s) on $SLURM_JOB_NODELIST" \
       "(master $MASTER_ADDR), runtime $SB_RUNTIME, config $SB_CONFIG"
  # Pre-flight: topology and a short all-reduce across every rank, before the benchmark.
  MASTER_PORT=$(sb_rank_env master-port --preflight) SB_TASK_RANKS=1 sb_run_or_print \
    srun --kill-on-bad-exit=1 --export=ALL "${srun_args[@]}" "$task" \
    -m scalebench.rank.preflight --output "$SCALEBENCH_PREFLIGHT"

  local launcher=("$SB_LAUNCHER_PYTHON" -m scalebench run "$SB_CONFIG"
                  --benchmark "$SB_BENCHMARK" --outputs "$SB_OUTPUTS" --launcher srun
                  --output "$SB_OUTPUT"
                  --python "$task"
                  "--srun-args=${srun_args[*]}")
  [ "${SB_RESUME:-0}" = 1 ] && launcher+=(--resume)
  [ "${SB_HTML:-1}" = 0 ] && launcher+=(--no-html)
  [ -n "${SB_RESTART_LIMIT:-}" ] && launcher+=(--restart-limit "$SB_RESTART_LIMIT")
  if [ "${SB_DRY_RUN:-0}" = 1 ]; then
    printf '%q ' "${launcher[@]}"; printf '\n'
    return 0
  fi
  # SLURM signals the batch shell before the time limit (--signal=B:TERM@...): pass it on to
  # the launcher, which stops the running experiment, keeps what finished and requeues the job.
  PYTHONPATH=$SB_REPO${PYTHONPATH:+:$PYTHONPATH} "${launcher[@]}" &
  local pid=$!
  trap 'kill -TERM "$pid" 2>/dev/null' TERM INT
  local status=0
  wait "$pid" || status=$?
  if kill -0 "$pid" 2>/dev/null; then  # wait was interrupted by the trap: wait for the end
    wait "$pid" || status=$?
  fi
  return "$status"
}

# The job's settings from the SB_* variables (defaults filled in, exported for the ranks and
# task-python.sh) and the image's identity; SB_OUTPUT defaults to <config name>_$1.
sb_setup() {
  set -euo pipefail
  SB_REPO=${SB_REPO:-${SLURM_SUBMIT_DIR:-$PWD}}
  SB_RUNTIME=${SB_RUNTIME:-none}
  SB_GPUS=${SB_GPUS:-0}
  : "${SB_CONFIG:?SB_CONFIG must name the experiment YAML file}"
  case "$SB_CONFIG" in /*) ;; *) SB_CONFIG=$SB_REPO/$SB_CONFIG ;; esac
  local config_name
  config_name=$(basename "$SB_CONFIG")
  SB_OUTPUT=${SB_OUTPUT:-${config_name%.*}_$1}
  SB_BENCHMARK=${SB_BENCHMARK:-$SB_REPO/benchmark_inference}
  SB_OUTPUTS=${SB_OUTPUTS:-$SB_BENCHMARK/outputs}
  SB_LAUNCHER_PYTHON=${SB_LAUNCHER_PYTHON:-$(sb_launcher_python)}
  # Read by scalebench/launch/launch_variables.py; scalebench/launch/runtimes.py builds every container command line.
  export SB_REPO SB_RUNTIME SB_ENGINE SB_GPUS SB_IMAGE SB_BINDS SB_DATA SB_WEIGHTS SB_PYTHON \
    SB_OUTPUTS SB_BENCHMARK SB_CONFIG SB_LAUNCHER_PYTHON
  if [ "$SB_RUNTIME" = docker ] || [ "$SB_RUNTIME" = podman ]; then
    if [ -z "${SB_IMAGE_DIGEST:-}" ]; then  # every rank runs the image the tag names now
      local identity
      identity=$(PYTHONPATH=$SB_REPO "$SB_LAUNCHER_PYTHON" -m scalebench.launch.containers identity)
      SB_IMAGE_DIGEST=${identity%%$'\n'*} SB_IMAGE_LABELS_JSON=${identity#*$'\n'}
    fi
    export SB_IMAGE_DIGEST SB_IMAGE_LABELS_JSON
  elif [ "$SB_RUNTIME" = apptainer ] && [ -z "${SB_IMAGE_DIGEST:-}" ] && [ -r "${SB_IMAGE:-}" ]; then
    SB_IMAGE_DIGEST=$(PYTHONPATH=$SB_REPO "$SB_LAUNCHER_PYTHON" -m scalebench.launch.containers identity)
    export SB_IMAGE_DIGEST
  fi
  [ "${SB_DRY_RUN:-0}" = 1 ] || mkdir -p "$SB_OUTPUTS"  # containers bind it
}

sb_run_or_print() {
  if [ "${SB_DRY_RUN:-0}" = 1 ]; then
    printf '%q ' "$@"; printf '\n'
  else
    "$@"
  fi
}

sb_launcher_python() {
  if [ "$SB_RUNTIME" = none ]; then echo "${SB_PYTHON:-$SB_REPO/.venv/bin/python}"
  else echo python3; fi
}

sb_rank_env() {
  # The job's rendezvous address and port: scalebench.launch.rank_env, the rule the launcher
  # and the ranks use too.
  PYTHONPATH=$SB_REPO "$SB_LAUNCHER_PYTHON" -m scalebench.launch.rank_env "$@"
}
