"""Planning a campaign before it runs, over the experiments ``scalebench.experiment`` expands:

- ``jobs``: a job and what it asks for (nodes, ranks, GPUs, CPUs, the time limit);
- ``parallel_config``: benchopt's submitit parallel config that carries SLURM resources;
- ``plan``: ``scalebench plan``, every job of a campaign with its resources and command;
- ``memory``: one rank's memory, calibrated or a lower bound;
- ``plan_time``: a job's predicted wall time from its configuration's time model;
- ``capacity``: the memory and time models, calibrated by probes, and the largest size
  each configuration fits in a memory or time budget (``scalebench capacity``).

The models never import ``plan``; ``plan`` reads them.
"""
