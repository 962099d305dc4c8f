"""An out-of-tree ExecuTorch delegate for bti, as a vendor ships one (the vendor guide, docs/backends.md, walks
through it). Its partitioner, ``example-npu``, is XNNPACK's standing in for the vendor's own, so the example runs
anywhere; a real delegate returns its own partitioner (and quantizer) from the same methods.

It shows each part of the contract a vendor needs:

* a partitioner of its own, named in recipes (``partitioners: [example-npu]``): declared in
  ``extra_partitioners`` and built by ``partitioner()``;
* a quantizer of its own, named in recipes (``quantize: {quantizer: example-npu}``): declared in
  ``extra_quantizers`` and built by ``quantizer()``, which returns a pt2e ``Quantizer``;
* a recipe key of its own (``vendor``), declared in ``extra_keys``: ExecuTorch's parser checks its own keys and
  passes this one through in ``recipe.options.extra["vendor"]``;
* its values checked once, in the parent, with the recipe's file and line (``RecipeError``);
* the ExecuTorch options object kept as it is: a backend that returned an options class of its own would lose the
  recipe's partitioners and quantizer (bti refuses that recipe, naming the reason);
* a constraint of the device enforced while lowering: a failure there is the item's FAIL_LOWER, with this message.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from harness.backends import Where, check_keys
from harness.backends.executorch import ExecuTorchBackend, ExecuTorchOptions, Quantize
from harness.errors import RecipeError


class ExampleDelegate(ExecuTorchBackend):
    name = "example-delegate"
    extra_keys = frozenset({"vendor"})  # ExecuTorch's keys (partitioners, quantize, ...) plus this one
    extra_partitioners = frozenset({"example-npu"})  # beside ExecuTorch's own (xnnpack, coreml, ...)
    extra_quantizers = frozenset({"example-npu"})  # beside ExecuTorch's own (xnnpack, openvino, arm)

    def partitioner(self, name: str, recipe: Any) -> Any:
        if name == "example-npu":
            from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner

            return XnnpackPartitioner()  # stands in for the vendor's partitioner (and its compiler, in preprocess)
        return super().partitioner(name, recipe)

    def quantizer(self, cfg: Quantize) -> Any:
        # cfg is the recipe's `quantize:` mapping, parsed: cfg.quantizer (the name), cfg.per_channel, cfg.dynamic,
        # cfg.fold_quantize. Return a pt2e Quantizer: bti prepares the exported program with it, calibrates on the
        # case's inputs, converts, and judges the delegate against that converted (quantized) program.
        if cfg.quantizer == "example-npu":
            from executorch.backends.xnnpack.quantizer.xnnpack_quantizer import (
                XNNPACKQuantizer,
                get_symmetric_quantization_config,
            )

            config = get_symmetric_quantization_config(is_per_channel=cfg.per_channel, is_dynamic=cfg.dynamic)
            return XNNPACKQuantizer().set_global(config)  # stands in for the vendor's quantizer
        return super().quantizer(cfg)

    def parse_options(self, raw: Mapping[str, Any], where: Where) -> ExecuTorchOptions:
        opts = super().parse_options(raw, where)  # ExecuTorch's keys checked; ours arrive in opts.extra
        vendor = opts.extra.get("vendor") or {}
        if not isinstance(vendor, dict):
            raise RecipeError(f"{where('vendor')}: `vendor` takes a mapping, not {vendor!r}")
        check_keys(vendor, {"max_partitions"}, lambda _key=None: where("vendor"), f"{self.name} (vendor)")
        limit = vendor.get("max_partitions", 0)
        if not isinstance(limit, int) or isinstance(limit, bool) or limit < 0:
            raise RecipeError(f"{where('vendor')}: vendor.max_partitions takes a whole number >= 0, not {limit!r}")
        return opts  # the same ExecuTorchOptions: its partitioners and quantizer are what `lower` uses

    def lower(self, recipe: Any, ep: Any, built: Any = None) -> tuple[Any, dict[str, Any]]:
        lowered, stats = super().lower(recipe, ep, built)  # stats: delegated/undelegated ops, edge op name -> count
        limit = (recipe.options.extra.get("vendor") or {}).get("max_partitions", 0)
        partitions = stats["delegated_subgraphs"]
        if limit and partitions > limit:
            raise RuntimeError(f"{partitions} delegated partitions: this NPU loads at most {limit} per program")
        return lowered, stats
