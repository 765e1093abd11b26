"""Launching experiments: the light launcher (standard library only, so the process that waits
for a run holds no copy of the stack), rank processes, and the short-lived steps that need it.

- ``runner``: ``scalebench run``: one experiment after the other, each on its ranks, results
  published after each, resumable, stopped cleanly by SIGTERM / SIGINT.
- ``ranks``: starting the ranks of one experiment, locally or with ``srun``.
- ``rank_entry``: what each rank runs: benchopt on the experiment, its log, its failure note.
- ``progress``: the set-up stages and iterations a rank reports, and how they are shown.
- ``steps``: expanding and validating a config, publishing results, rendering the report;
  these import the whole stack and run in children of the launcher.
"""
