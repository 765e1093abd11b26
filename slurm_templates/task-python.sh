#!/bin/bash
# Python with the benchmark's stack, in the configured runtime: `task-python.sh ARGS...` runs
# `python ARGS...` on the host's venv (SB_RUNTIME=none), inside an Apptainer image
# (apptainer) or inside a Docker / podman image (docker, podman).
#
# The command line comes from scalebench/launch/containers.py (standard library, run with the host's
# SB_LAUNCHER_PYTHON, default python3): its runtimes (runtimes.py) are the one place that builds
# it for the launcher, the launch helper and these templates; launch_variables.py's docstring
# lists the variables it reads (SB_RUNTIME,
# SB_ENGINE, SB_IMAGE, SB_GPUS, SB_PYTHON, SB_BINDS, SB_DATA, SB_WEIGHTS...). Inside an srun
# step (SB_TASK_RANKS=1, set by the launcher) it maps SLURM's task variables to RANK /
# WORLD_SIZE / LOCAL_RANK / LOCAL_WORLD_SIZE and hands them, with MASTER_ADDR / MASTER_PORT
# and the SLURM ids provenance records, to the container explicitly: a clean container
# environment has no SLURM_* variables. SB_DRY_RUN=1 prints the command instead.
set -euo pipefail

SB_REPO=${SB_REPO:?SB_REPO must name the repository folder}
mode=exec
[ "${SB_DRY_RUN:-0}" = 1 ] && mode=argv
export PYTHONPATH=$SB_REPO${PYTHONPATH:+:$PYTHONPATH}
exec "${SB_LAUNCHER_PYTHON:-python3}" -m scalebench.launch.containers "$mode" -- "$@"
