"""An out-of-tree accelerator for bti, as a vendor ships one: importing the package registers the PrivateUse1
device ``npu`` (``device.py``: CPU kernels behind torch's extension points), as importing ``torch_npu`` registers
Ascend's. bti runs it with its built-in ``torch-eager`` backend; the recipe (``recipes/torch-npu.yaml``) names the
device and this package in ``import:``, which bti imports in the parent before its workers fork."""

from bti_example_npu.device import install

install("npu")
