"""One module per denoiser, each holding its ``SPEC`` (scalebench.denoisers.spec); the
registry is ``scalebench.denoisers.catalog.DENOISERS``."""
