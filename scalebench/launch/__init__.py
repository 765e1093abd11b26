"""Launching experiments, with the standard library only: the process that waits for a run
holds no torch, deepinv or problem data, and the batch templates run it with any host Python.

- ``runner``: ``scalebench run``: one experiment after the other, each on its ranks, results
  published after each, resumable, stopped cleanly by SIGTERM / SIGINT.
- ``failures``: what went wrong with a failed experiment: the rank that failed first, how,
  and the line printed and recorded for it.
- ``processes``: starting the rank processes of one experiment, locally or with ``srun``.
- ``rank_entry``: what each rank runs: benchopt on the experiment, its log, its failure note.
- ``rank_env``: RANK & co. from SLURM's task variables, the job's MASTER_ADDR and MASTER_PORT.
- ``resources``: the ranks and srun options a run asks for (its ``slurm_*`` parameters).
- ``containers``: the command line of each container platform (host, Apptainer, Docker,
  podman) and image identities.
- ``progress``: the set-up stages and iterations a rank reports, and how they are shown.
- ``liveness``: each rank's heartbeat, and the rule that names a rank hung (silent, or its
  progress stalled) so that its step is stopped.
- ``requeue``: under SLURM, a launch its allocation cannot finish (a node lost or hung, the
  next experiment not fitting the job's time, the time limit's SIGTERM) requeues its own job,
  excluding the node, within the restart limit.
- ``children``: what the launcher runs in short-lived children because it needs the whole
  stack: expanding a config, publishing results, rendering the report.
"""
