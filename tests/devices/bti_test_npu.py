"""Importing this registers the test PrivateUse1 device ``npu`` (tests/devices/npu_device.py), as importing a
vendor's package (``torch_npu``) registers theirs. A torch-eager recipe names it in ``import:``."""

from npu_device import install

install("npu")
