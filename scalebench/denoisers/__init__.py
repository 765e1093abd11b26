"""Denoisers: their names, sizes and weights without torch (``catalog``), the tile arithmetic
(``tiles``), the networks and their weights (``networks``, with scalebench's own small
networks in ``bundled``), tiles of their input in one process and across ranks (``tiling``),
and the configured denoiser of a run (``build``)."""
