"""How large a reconstruction fits a memory budget: a per-rank peak-memory model calibrated by
short real runs (``probe``), fitted per term (``model``), cached per configuration
(``calibration``), and the ``scalebench capacity`` command over an experiment grid
(``command``)."""
