"""benchopt's command line as a rank process runs it: ``python -m scalebench.benchopt_glue run
BENCHMARK ...`` takes benchopt's arguments unchanged, after loading the libraries every run
imports the way ``scalebench.rank.startup`` describes (``rank_entry.benchopt_command``).
Under ``rank_entry`` its heartbeat starts first (``scalebench.launch.liveness``)."""

import sys

from scalebench.launch.liveness import start_heartbeat
from scalebench.rank.startup import import_and_freeze

if __name__ == "__main__":
    start_heartbeat()
    import_and_freeze()
    from benchopt.cli import benchopt

    sys.exit(benchopt(prog_name="benchopt"))
