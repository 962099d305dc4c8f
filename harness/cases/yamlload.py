"""YAML loading that remembers line numbers, so spec errors read ``file:line: message``."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import yaml

from harness.errors import SpecError


class LDict(dict):  # type: ignore[type-arg]
    line: int = 0
    file: str = ""
    key_lines: dict[str, int] = {}


class LList(list):  # type: ignore[type-arg]
    line: int = 0
    file: str = ""


# libyaml's parser where PyYAML was built with it (PyPI's wheels are): 6x faster on the recipes and their rules files,
# which every bti process reads; its marks carry the same lines
class _Loader(getattr(yaml, "CSafeLoader", yaml.SafeLoader)):  # type: ignore[misc]
    pass


def _mapping(loader: _Loader, node: yaml.MappingNode) -> LDict:
    out = LDict(loader.construct_mapping(node, deep=True))
    out.line = node.start_mark.line + 1
    out.key_lines = {str(k.value): k.start_mark.line + 1 for k, _ in node.value}
    out.file = node.start_mark.name
    return out


def _sequence(loader: _Loader, node: yaml.SequenceNode) -> LList:
    out = LList(loader.construct_sequence(node, deep=True))
    out.line = node.start_mark.line + 1
    out.file = node.start_mark.name
    return out


_Loader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _mapping)
_Loader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_SEQUENCE_TAG, _sequence)


def load_yaml(path: Path) -> Any:
    """Parse ``path``; any syntax error becomes a one-line ``SpecError`` with file:line."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise SpecError(f"{path}: cannot read: {exc.strerror}") from None
    except UnicodeDecodeError as exc:
        raise SpecError(f"{path}: not UTF-8 text (byte 0x{exc.object[exc.start]:02x} at offset {exc.start}); "
                        "suites and recipes are YAML files") from None
    try:
        stream = io.StringIO(text)
        stream.name = str(path)  # where both parsers take the marks' file name from
        loader = _Loader(stream)
        try:
            return loader.get_single_data()
        finally:
            loader.dispose()
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = mark.line + 1 if mark else 0
        raise SpecError(f"{path}:{line}: invalid YAML: {exc.problem or exc.context}") from None
    except yaml.YAMLError as exc:
        raise SpecError(f"{path}: invalid YAML: {exc}") from None


def where(node: Any, fallback: str = "", key: str | None = None) -> str:
    """``file:line`` for a node loaded by ``load_yaml`` (the line of ``key`` when given), or the fallback."""
    if isinstance(node, (LDict, LList)) and node.file:
        line = node.key_lines.get(key, node.line) if key and isinstance(node, LDict) else node.line
        return f"{node.file}:{line}"
    return fallback
