"""bti — Backend Test Infrastructure for PyTorch / ExecuTorch backends.

The package is split so that everything after ``results.jsonl`` (reports, compare, publishers)
never imports torch or executorch: see ``harness.results`` for the JSONL contract.
"""

__version__ = "0.1.0"
__all__ = ["__version__"]
