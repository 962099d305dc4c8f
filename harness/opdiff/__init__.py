"""opdiff's suites in bti, all in one package: its suite files (``suite.py``, registered as a suite file format), its
input grammar (``nodes.py``), its modules and sampled inputs (``build.py``, worker side, torch) and its results format
(``report.py``, registered as a report format). Importing the package imports none of them (no torch)."""
