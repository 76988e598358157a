"""The house's rules, checked on the import graph of the package's source (every import,
including those inside functions): imports point down the layers and nothing is in a cycle."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tests import REPO

PACKAGE = REPO / "rag_judge"

# Lower layers first. A module may import its own package and anything in a lower layer;
# nothing in a higher one, and nothing beside it in the same layer (llm and metrics are peers).
LAYERS: list[tuple[str, ...]] = [
    ("rag_judge._version", "rag_judge.errors", "rag_judge._lazy"),
    ("rag_judge._async", "rag_judge._progress", "rag_judge.messages", "rag_judge.resources",
     "rag_judge.stats", "rag_judge.text"),
    ("rag_judge.data",),
    ("rag_judge.report.judgments",),
    ("rag_judge.report.types", "rag_judge.report.estimates", "rag_judge.report.thresholds",
     "rag_judge.report.format"),
    ("rag_judge.report.segments",),
    ("rag_judge.report.result",),
    ("rag_judge.report.samples",),
    ("rag_judge.report.model",),
    ("rag_judge.llm", "rag_judge.metrics"),
    ("rag_judge.judge",),
    ("rag_judge.evaluators", "rag_judge.synth"),
    ("rag_judge.analysis", "rag_judge.report", "rag_judge.config"),
    ("rag_judge.pipeline",),
    ("rag_judge.cli", "rag_judge.testing"),
    ("rag_judge",),
]  # fmt: skip


def _modules() -> dict[str, Path]:
    out = {}
    for path in PACKAGE.rglob("*.py"):
        parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


MODULES = _modules()


def _imports(name: str, path: Path) -> set[str]:
    """The package modules ``name`` imports (``from x import y`` counts y when y is a module)."""
    found: set[str] = set()
    is_package = path.name == "__init__.py"
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        targets: list[str] = []
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = name.split(".") if is_package else name.split(".")[:-1]
                anchor = anchor[: len(anchor) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            # ``from pkg import mod`` imports the module; ``from pkg import name``, the package
            subs = [f"{base}.{a.name}" for a in node.names]
            modules = [t for t in subs if t in MODULES]
            targets = modules if len(modules) == len(subs) else [*subs, base]
        for target in targets:
            while target and target not in MODULES:
                target = target.rpartition(".")[0]
            if target and target != name:
                found.add(target)
    return found


GRAPH = {name: _imports(name, path) for name, path in MODULES.items()}


def _layer(module: str) -> tuple[int, str]:
    """(layer index, the most specific prefix that placed it)."""
    best: tuple[int, str] = (-1, "")
    for index, prefixes in enumerate(LAYERS):
        for prefix in prefixes:
            if (module == prefix or module.startswith(prefix + ".")) and len(prefix) > len(best[1]):
                best = (index, prefix)
    assert best[0] >= 0, f"{module} is in no layer: add it to LAYERS"
    return best


def test_every_module_has_a_layer() -> None:
    for module in MODULES:
        _layer(module)


@pytest.mark.parametrize("module", sorted(MODULES))
def test_imports_point_down(module: str) -> None:
    layer, home = _layer(module)
    wrong = []
    for target in sorted(GRAPH[module]):
        target_layer, target_home = _layer(target)
        if target_home == home or target_layer < layer:
            continue
        wrong.append(f"{target} (layer {target_layer}: {target_home})")
    assert not wrong, f"{module} (layer {layer}: {home}) imports upward or sideways: {wrong}"


def test_no_import_cycles() -> None:
    def reach(start: str) -> set[str]:
        seen: set[str] = set()
        todo = [start]
        while todo:
            for nxt in GRAPH[todo.pop()]:
                if nxt not in seen and nxt != "rag_judge":
                    seen.add(nxt)
                    todo.append(nxt)
        return seen

    # The package root re-exports its submodules, and a submodule importing ``rag_judge.x``
    # passes through the root's __init__ only by name: leave the root out of the graph.
    cyclic = sorted(m for m in MODULES if m != "rag_judge" and m in reach(m))
    assert not cyclic, f"modules inside import cycles: {cyclic}"


def test_at_most_nine_modules_at_the_top() -> None:
    top = sorted(p.name for p in PACKAGE.glob("*.py"))
    assert len(top) <= 9, top
