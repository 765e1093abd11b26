#!/bin/bash
# scalebench tune across an allocation: every task a tuning worker of the same studies (their
# journals in SB_OUTPUTS/<name>/, on a file system every node sees), then one step that writes
# the results parquet of every trial and the tuned config (docs/tuning.md).
#   sbatch --nodes=2 --ntasks-per-node=2 \
#          --export=ALL,SB_CONFIG=configs/examples/methods.yml,SB_TRIALS=40,\
#   SB_RUNTIME=apptainer,SB_IMAGE=scalebench.sif slurm_templates/tune.sh
# Options: see slurm_templates/common.sh (SB_RESUME and SB_HTML do not apply: the same
# SB_OUTPUT always resumes), and
#   SB_OUTPUT       tuning name (default: <config name>_tune, as `scalebench tune`'s)
#   SB_TRIALS       ended trials per study (default: scalebench tune's, 20 without SB_BUDGET)
#   SB_BUDGET       wall time after which a worker starts no trial (90min, 2h, 01:30:00)
#   SB_OBJECTIVE    quality (default) or time-to:DB
# Each worker runs its trials on its own task's cores (one rank each). A job cut by its time
# limit, or requeued, leaves its running trials RUNNING: the next start fails them (their
# workers' heartbeats are gone) and goes on; ended trials are never redone.
#SBATCH --job-name=scalebench-tune
#SBATCH --nodes=1
#SBATCH --ntasks-per-node=2
#SBATCH --time=01:00:00
#SBATCH --output=scalebench-tune-%j.out
#SBATCH --requeue
#SBATCH --open-mode=append
source "${SB_REPO:-${SLURM_SUBMIT_DIR:-$PWD}}/slurm_templates/common.sh"

sb_tune() {
  set -euo pipefail
  sb_setup tune
  local task=$SB_REPO/slurm_templates/task-python.sh
  local srun_args=()
  [ "$SB_GPUS" = 1 ] && srun_args+=(--gpus-per-task=1)
  local tune=("$task" -m scalebench tune "$SB_CONFIG" --outputs "$SB_OUTPUTS"
              --output "$SB_OUTPUT")
  [ -n "${SB_TRIALS:-}" ] && tune+=(--trials "$SB_TRIALS")
  [ -n "${SB_BUDGET:-}" ] && tune+=(--budget "$SB_BUDGET")
  [ -n "${SB_OBJECTIVE:-}" ] && tune+=(--objective "$SB_OBJECTIVE")

  echo "[scalebench] job $SLURM_JOB_ID: tuning $SB_CONFIG with $SLURM_NTASKS worker(s) on" \
       "$SLURM_JOB_NODELIST, runtime $SB_RUNTIME, into $SB_OUTPUTS/$SB_OUTPUT"
  # One worker a task: its index is the task's (expanded inside the step, per task). A worker
  # that fails leaves the others working.
  local status=0
  sb_run_or_print srun --export=ALL "${srun_args[@]}" \
    bash -c 'exec "$@" --worker "$SLURM_PROCID"' worker "${tune[@]}" || status=$?
  # The outputs of every ended trial, here, running no trial (--workers 0).
  sb_run_or_print "${tune[@]}" --workers 0 || status=$((status ? status : $?))
  return "$status"
}

sb_tune
