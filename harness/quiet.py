"""Silence import-time chatter of torch/torchao/executorch (warnings and log lines that are not ours).

Errors are still captured per item in the records; this only keeps the terminal readable.
"""

from __future__ import annotations

import logging
import os
import warnings


def quiet() -> None:
    os.environ.setdefault("TORCH_CPP_LOG_LEVEL", "ERROR")
    warnings.filterwarnings("ignore", category=FutureWarning)
    warnings.filterwarnings("ignore", category=DeprecationWarning)
    warnings.filterwarnings("ignore", category=UserWarning)
    for name in ("torchao", "torch", "torch.utils._pytree", "executorch", "root"):
        logging.getLogger(name).setLevel(logging.ERROR)
