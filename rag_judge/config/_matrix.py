"""Variant matrices: one config mapping expanded into several experiments, and a variant's
name as a folder name; ``rag_judge.config`` re-exports ``expand_matrix`` and ``folder_name``."""

from __future__ import annotations

import copy
import itertools
import re
from typing import Any

from rag_judge.errors import ConfigError

__all__ = ["expand_matrix", "folder_name"]


# Variant matrices: one config file, several experiments.
#
# ```yaml
# matrix:
#   judge:                                   # an axis
#     stub: {evaluators.3.client.stub: lexical_support}
#     fixed: {evaluators.3.client.stub: fixed}
#   k:                                       # another axis
#     k3: {evaluators.0.metrics: [ndcg@3, map]}
#     k5: {evaluators.0.metrics: [ndcg@5, map]}
# ```
#
# Every combination of one variant per axis is an experiment (here four), named
# ``judge=stub,k=k3`` and so on. A variant sets values by dotted path into the config (list items
# by index). List indices must exist; a misspelt mapping key is reported by the config's own
# validation as an unknown key, naming the variant.


def expand_matrix(data: dict[str, Any], source: str) -> list[tuple[str, dict[str, Any]]]:
    """(name, config mapping) for each variant; the mapping itself, named "", without a matrix."""
    data = dict(data)
    matrix = data.pop("matrix", None)
    if matrix is None:
        return [("", data)]
    if not isinstance(matrix, dict) or not matrix:
        raise ConfigError(f"{source}: matrix: a mapping of axis name -> variants")
    axes = []
    for axis, variants in matrix.items():
        if not isinstance(variants, dict) or not variants:
            raise ConfigError(f"{source}: matrix.{axis}: a mapping of variant name -> settings")
        for name, settings in variants.items():
            if not isinstance(settings, dict):
                raise ConfigError(
                    f"{source}: matrix.{axis}.{name}: a mapping of dotted key -> value"
                )
        axes.append([(axis, name, settings) for name, settings in variants.items()])
    out = []
    for combo in itertools.product(*axes):
        variant = copy.deepcopy(data)
        for axis, name, settings in combo:
            for key, value in settings.items():
                _set(variant, str(key), copy.deepcopy(value), f"{source}: matrix.{axis}.{name}")
        out.append((",".join(f"{axis}={name}" for axis, name, _ in combo), variant))
    return out


def _set(data: dict[str, Any], dotted: str, value: Any, where: str) -> None:
    parts = dotted.split(".")
    node: Any = data
    for depth, part in enumerate(parts[:-1]):
        node = _child(node, part, ".".join(parts[: depth + 1]), dotted, where)
    last = parts[-1]
    if isinstance(node, list):
        _child(node, last, dotted, dotted, where)  # checks the index exists
        node[int(last)] = value
    elif isinstance(node, dict):
        node[last] = value
    else:
        raise ConfigError(f"{where}: key {dotted!r}: {'.'.join(parts[:-1])} is not a mapping")


def _child(node: Any, part: str, prefix: str, dotted: str, where: str) -> Any:
    if isinstance(node, dict):
        # A missing mapping key is created (options left at their defaults are absent from
        # the file); a misspelt one then fails validation as an unknown key.
        return node.setdefault(part, {})
    if isinstance(node, list) and part.isdigit() and int(part) < len(node):
        return node[int(part)]
    size = f" (it has {len(node)} items)" if isinstance(node, list) else ""
    raise ConfigError(f"{where}: key {dotted!r}: {prefix!r} does not exist{size}")


def folder_name(variant: str) -> str:
    """A variant name as a safe folder name: ``judge=stub,k=k3`` -> ``judge-stub_k-k3``."""
    return re.sub(r"[^A-Za-z0-9._-]+", "_", variant.replace("=", "-").replace(",", "_"))
