"""The benchopt classes of both benchmarks, which the benchmark folders subclass thinly.

- ``base``: a Dataset that names a scalebench problem, and a Solver that runs a measured loop
  for ``max_iter`` iterations on one or several ranks;
- ``inference``: the inference benchmark's solvers (a loop around one denoiser);
- ``training``: the training benchmark's Dataset and Solver;
- ``__main__``: benchopt's command line as a rank process runs it (``python -m
  scalebench.benchopt_glue run ...``).
"""
