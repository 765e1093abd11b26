"""Supervised training of unrolled PnP networks: one benchopt iteration = one training step.

- ``params``: the training solver's parameters and the checks made before anything runs;
- ``patches``: seeded random training patches and the held-out validation image;
- ``network``: the unrolled proximal-gradient network, its spatial split across ranks and
  its activation checkpointing;
- ``step``: one measured training step (forward, loss, backward, gradient all-reduce,
  clipping, optimizer).

The problems it draws patches from are ``scalebench.problems.training``; its benchopt classes
are ``scalebench.benchopt_glue.training``.
"""
