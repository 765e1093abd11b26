#!/bin/bash
# scalebench across nodes: one task (rank) per GPU, or per CPU rank, on every node.
#   sbatch --nodes=4 --ntasks-per-node=4 --gpus-per-node=4 \
#          --export=ALL,SB_CONFIG=configs/scaling/strong_scaling.yml,SB_GPUS=1,\
#   SB_RUNTIME=apptainer,SB_IMAGE=scalebench.sif slurm_templates/multinode.sh
# Options: see slurm_templates/common.sh. Run sbatch from the repository's root.
#SBATCH --job-name=scalebench
#SBATCH --nodes=2
#SBATCH --ntasks-per-node=1
#SBATCH --time=01:00:00
#SBATCH --signal=B:TERM@30
#SBATCH --output=scalebench-%j.out
# Preempted, or a node failed: SLURM starts the script again (same job id), which resumes its
# result; the log of each start is kept, one after the other.
#SBATCH --requeue
#SBATCH --open-mode=append
source "${SB_REPO:-${SLURM_SUBMIT_DIR:-$PWD}}/slurm_templates/common.sh"
sb_main
