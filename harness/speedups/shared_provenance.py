"""Speedup 7: provenance shared, not deep-copied.

Every node a pass creates records where it came from: ``torch.fx.traceback.NodeSource``, whose constructor
deep-copies the source node's whole ancestry (``copy.deepcopy(node.meta["from_node"])``). The chains grow with
every pass, so lowering spent ~15% of its time copying them. bti's constructor shares the ancestors in a list of
its own instead. Nothing changes a NodeSource once it is built (torch and executorch only read ``from_node``,
walking it for debug handles; its two caches are functions of its contents), so the shared ancestry equals the
copy: the same ``to_dict()``, ``==`` and hash.
"""

from __future__ import annotations

import copy
from typing import Any

from harness.speedups.base import VERIFIED, Speedup


def node_source_init(self: Any, node: Any, pass_name: str = "", action: Any = None) -> None:
    """``torch.fx.traceback.NodeSource.__init__`` with the ancestors shared instead of deep-copied. A NodeSource is
    never changed once built (torch and executorch only read ``from_node``; the two caches it fills on first use
    are functions of its contents), so a shared ancestor and a deep copy of it are the same value. Anything but a
    list of NodeSource objects is still deep-copied."""
    node_source, node_source_action = SPEEDUP.types
    self.pass_name = pass_name
    if action is None:
        action = []
    elif not isinstance(action, list):
        action = [action]
    for a in action:
        if not isinstance(a, node_source_action):
            raise AssertionError(f"Expected NodeSourceAction, got {type(a)}")
    self.action = action
    if node:
        self.node_info = self.NodeInfo(name=node.name, target=str(node.target), graph_id=id(node.graph))
        ancestors = node.meta.get("from_node", [])
        if type(ancestors) is list and all(type(a) is node_source for a in ancestors):
            self.from_node = list(ancestors)
        else:
            self.from_node = copy.deepcopy(ancestors)
    else:
        self.node_info = None
        self.from_node = []
    self._action_string = None
    self._dict = None


class SharedProvenance(Speedup):
    number, name, verified_on = 7, "shared-provenance", VERIFIED

    def __init__(self) -> None:
        super().__init__()
        self.types: Any = None  # (NodeSource, NodeSourceAction): looked up once, not per node

    def install(self) -> None:
        from torch.fx.traceback import NodeSource, NodeSourceAction

        self.types = (NodeSource, NodeSourceAction)
        self.patch(NodeSource, "__init__", node_source_init)


SPEEDUP = SharedProvenance()
