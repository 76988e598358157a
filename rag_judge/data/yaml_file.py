"""A YAML file read with its line marks, for errors that say ``file:line``: configs and rubric
files both read through here."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from rag_judge.errors import ConfigError

__all__ = ["child_node", "line_of", "read_yaml"]


def read_yaml(path: Path, what: str, missing: str) -> tuple[Any, yaml.Node | None]:
    """The data of the YAML file at ``path`` and its node tree. A file that is missing (the
    message ``missing``), a folder, unreadable, not UTF-8 or not YAML is a ConfigError naming
    it (and the line of a YAML error); ``what`` names the kind of file ("a rubric file")."""
    if path.is_dir():  # else an IsADirectoryError (a traceback), or on Windows a PermissionError
        found = sorted(p.name for p in path.glob("*.y*ml"))
        inside = f" (it holds {', '.join(found)})" if found else ""
        raise ConfigError(f"{path}: is a folder, not {what}{inside}")
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(f"{path}: {missing}") from None
    except OSError as exc:  # unreadable: permissions, a device
        raise ConfigError(f"{path}: cannot be read ({exc.strerror or exc})") from None
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    try:
        root = yaml.compose(text)
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"{path}:{mark.line + 1}" if mark is not None else str(path)
        problem = getattr(exc, "problem", None) or str(exc)
        raise ConfigError(f"{where}: invalid YAML: {problem}") from None
    return data, root


def child_node(node: yaml.Node | None, part: int | str) -> yaml.Node | None:
    """The value node under a mapping key or a list index, or None."""
    if isinstance(node, yaml.MappingNode):
        return next((v for k, v in node.value if str(k.value) == str(part)), None)
    if (
        isinstance(node, yaml.SequenceNode)
        and isinstance(part, int)
        and 0 <= part < len(node.value)
    ):
        return node.value[part]  # type: ignore[no-any-return]
    return None


def line_of(
    node: yaml.Node | None, loc: tuple[int | str, ...], *, at_key: bool = False
) -> int | None:
    """1-based line of the YAML node at ``loc`` under ``node``, or of its nearest existing
    parent; with ``at_key``, of the last key itself rather than its value (an unknown key).
    None without a node."""
    if node is None:
        return None
    line = node.start_mark.line + 1
    for depth, part in enumerate(loc, start=1):
        found = child_node(node, part)
        if at_key and depth == len(loc) and isinstance(node, yaml.MappingNode):
            found = next((k for k, _ in node.value if str(k.value) == str(part)), found)
        if found is None:
            break
        node, line = found, found.start_mark.line + 1
    return line
