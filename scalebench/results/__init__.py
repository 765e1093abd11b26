"""Results: the results store (``store``: publishing the parquet, its run status), saved
estimate images (``estimates``), bit-for-bit replay of archived rows (``replay``), two files' runs
compared across environments (``compare``) and the offline HTML report (``report``)."""
