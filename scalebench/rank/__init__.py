"""What runs inside a rank around the loops: how its process starts (``startup``), the process
group and its timed collectives (``context``), checks across ranks (``rank_checks``),
deterministic mode, per-step profiling, quality metrics (and their names), the operator norm,
the provenance stamped on every row, the pre-flight check of a SLURM job, and the settings a
memory probe runs its process under (``settings``). ``names``, ``settings`` and ``startup``
import no torch.
"""
