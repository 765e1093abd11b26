"""scalebench: shared code of the scalebench benchmarks (problems, solvers' loops, profiling, CLI)."""

__version__ = "0.1.0"
