"""How large a reconstruction fits a memory budget: a per-rank peak-memory model calibrated by
short real runs (``probe``), fitted per term (``model``), of a configuration (``configuration``)
probed at a few sizes and searched for the largest fitting one (``calibration``), cached per
configuration (``calibration_cache``), refined near the answer (``refine``), and the
``scalebench capacity`` command over an experiment grid (``command``)."""
