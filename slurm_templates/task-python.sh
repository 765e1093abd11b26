#!/bin/bash
# Python with the benchmark's stack, in the configured runtime: `task-python.sh ARGS...` runs
# `python ARGS...` on the host's venv (SB_RUNTIME=none), inside an Apptainer image
# (apptainer) or inside a Docker / podman image (docker, podman).
#
# Inside an srun step (SB_TASK_RANKS=1, set by the launcher) it maps SLURM's task variables to
# RANK / WORLD_SIZE / LOCAL_RANK / LOCAL_WORLD_SIZE and hands them, with MASTER_ADDR /
# MASTER_PORT and the SLURM ids provenance records, to the container explicitly: a clean
# container environment has no SLURM_* variables. SB_DRY_RUN=1 prints the command instead.
#
# Variables: SB_RUNTIME (none), SB_REPO (the repository, bound at the same path), SB_PYTHON
# (venv python for none, `python` in images), SB_IMAGE (SIF file or image name), SB_IMAGE_DIGEST
# (docker/podman: the image id handed to provenance), SB_GPUS (1: expose GPUs), SB_BINDS
# (extra host:container binds, comma-separated), SB_OUTPUTS, SB_DATA, SB_WEIGHTS (bound at the
# same path unless inside the repository; SB_WEIGHTS becomes TORCH_HOME).
set -euo pipefail

SB_RUNTIME=${SB_RUNTIME:-none}
SB_REPO=${SB_REPO:?SB_REPO must name the repository folder}
SB_GPUS=${SB_GPUS:-0}

if [ "${SB_TASK_RANKS:-0}" = 1 ]; then
  export RANK=$SLURM_PROCID WORLD_SIZE=$SLURM_NTASKS LOCAL_RANK=${SLURM_LOCALID:-0}
  per_node=${SLURM_NTASKS_PER_NODE:-${SLURM_TASKS_PER_NODE:-1}}
  per_node=${per_node%%(*}
  export LOCAL_WORLD_SIZE=${per_node%%,*}
fi
[ -n "${SB_WEIGHTS:-}" ] && export TORCH_HOME=$SB_WEIGHTS

# Variables the ranks and provenance need, passed explicitly into containers.
passed=(RANK WORLD_SIZE LOCAL_RANK LOCAL_WORLD_SIZE MASTER_ADDR MASTER_PORT SLURM_JOB_ID
        SLURM_STEP_ID SLURM_JOB_NODELIST SLURM_ARRAY_TASK_ID SLURM_RESTART_COUNT SLURM_NTASKS
        SLURM_NTASKS_PER_NODE SLURMD_NODENAME CUDA_VISIBLE_DEVICES SCALEBENCH_PREFLIGHT TORCH_HOME
        SCALEBENCH_COLLECTIVE_TIMEOUT_S OMP_NUM_THREADS)

binds=("$SB_REPO")
for extra in ${SB_OUTPUTS:-} ${SB_DATA:-} ${SB_WEIGHTS:-}; do
  case "$extra" in "$SB_REPO"/*) ;; *) binds+=("$extra") ;; esac  # already under the repo
done
IFS=, read -r -a extra_binds <<< "${SB_BINDS:-}"

command=()
case "$SB_RUNTIME" in
  none)
    command=("${SB_PYTHON:-$SB_REPO/.venv/bin/python}" "$@")
    ;;
  apptainer)
    command=(apptainer exec --cleanenv --pwd "$SB_REPO")
    [ "$SB_GPUS" = 1 ] && command+=(--nv)
    for name in "${passed[@]}"; do
      [ -n "${!name:-}" ] && command+=(--env "$name=${!name}")
    done
    for bind in "${binds[@]}"; do command+=(--bind "$bind:$bind"); done
    for bind in "${extra_binds[@]}"; do command+=(--bind "$bind"); done
    command+=("${SB_IMAGE:?SB_IMAGE must name the SIF file}" "${SB_PYTHON:-python}" "$@")
    ;;
  docker|podman)
    command=("$SB_RUNTIME" run --rm --network host --ipc host --workdir "$SB_REPO")
    if [ "$SB_GPUS" = 1 ]; then
      command+=(--gpus "device=${CUDA_VISIBLE_DEVICES:-all}")
    fi
    for name in "${passed[@]}"; do
      [ -n "${!name:-}" ] && command+=(--env "$name=${!name}")
    done
    command+=(--env "SCALEBENCH_IMAGE_DIGEST=${SB_IMAGE_DIGEST:?SB_IMAGE_DIGEST must be set}")
    for bind in "${binds[@]}"; do command+=(--volume "$bind:$bind"); done
    for bind in "${extra_binds[@]}"; do command+=(--volume "$bind"); done
    command+=("${SB_IMAGE:?SB_IMAGE must name the image}" "${SB_PYTHON:-python}" "$@")
    ;;
  *)
    echo "task-python.sh: SB_RUNTIME must be none, apptainer, docker or podman, got '$SB_RUNTIME'" >&2
    exit 2
    ;;
esac

if [ "${SB_DRY_RUN:-0}" = 1 ]; then
  printf '%q ' "${command[@]}"
  printf '\n'
  exit 0
fi
exec "${command[@]}"
