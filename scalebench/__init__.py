"""scalebench: code shared by the benchmarks (problems, solvers' loops, profiling, CLI)."""

__version__ = "0.1.0"
