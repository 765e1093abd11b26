"""Experiments: one YAML file of benchopt's format, a grid of dataset x solver parameters.

- ``reading``: the one YAML reader of configs and parallel configs;
- ``config``: reading a config and validating its whole grid before anything runs;
- ``expand``: the grid as one benchopt config per experiment, checked for this machine.

What a campaign costs (its jobs, their memory and time, the largest size that fits) is
``scalebench.planning``'s, above this package.
"""
