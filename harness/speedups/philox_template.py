"""Speedup 11: AOT tracing's rng-state placeholders made once.

Each ``run_decompositions`` trace resets six ``PhiloxState`` objects (torch's ``PhiloxStateTracker`` holds three,
reset on entry and exit), and each reset makes two empty placeholder tensors, which under the fake mode cost
~0.8 ms per reset (~14 ms per int8 lowering). They are read only with ``torch._functorch.config.functionalize_rng_ops``
on (torch's rng functionalization); otherwise bti's reset gives the state the values of a template made once (the
same attributes; the two placeholders are real empty tensors instead of fake ones). With the option on, torch's
reset runs.
"""

from __future__ import annotations

from typing import Any

from harness.speedups.base import VERIFIED, Speedup


def philox_reset(self: Any) -> None:
    """``PhiloxState.reset``: the template's values unless ``functionalize_rng_ops`` is on."""
    if SPEEDUP.config.functionalize_rng_ops:
        SPEEDUP.original(self)
        return
    self.__dict__.update(SPEEDUP.template)


class PhiloxTemplate(Speedup):
    number, name, verified_on = 11, "philox-template", VERIFIED

    def __init__(self) -> None:
        super().__init__()
        self.original: Any = None  # torch's PhiloxState.reset, while installed
        self.config: Any = None  # torch._functorch.config, looked up once
        self.template: dict[str, Any] = {}

    def install(self) -> None:
        from torch._decomp.decompositions_for_rng import PhiloxState
        from torch._functorch import config

        self.config = config
        template = PhiloxState.__new__(PhiloxState)
        PhiloxState.reset(template)  # type: ignore[no-untyped-call]  # outside any trace: real tensors
        self.template = dict(vars(template))
        self.original = self.patch(PhiloxState, "reset", philox_reset)


SPEEDUP = PhiloxTemplate()
