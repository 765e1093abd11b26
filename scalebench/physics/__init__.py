"""Every forward operator A of the benchmark (deepinv physics), with the backends it runs on.

- ``parallel_beam``: 2D parallel-beam CT: a chunked torch projector and ASTRA's;
- ``conebeam``: 3D cone-beam CT: ASTRA's CUDA projector, a deterministic torch ray-marcher
  and ITK-RTK's CPU projectors;
- ``radio``: radio-interferometric visibilities: ducc0, finufft, deepinv's torchkbnufft and
  an exact DFT;
- ``downsampling``: blur and subsampling (super-resolution);
- ``distributed``: a stack of operators split across ranks, its adjoint summed by all-reduce;
- ``host``: applying a host (numpy) library to torch tensors.
"""
