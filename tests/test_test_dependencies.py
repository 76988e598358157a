"""Every module a test imports only if it is there is installed by CI's ``.[all,dev]``: a test
that skips (or quietly drops a reference check) where its reference library is missing would
otherwise pass on a clean dev install without checking anything."""

from __future__ import annotations

import ast
import re
from importlib import metadata
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# Distributions whose import name differs from their name, where they are not installed.
IMPORT_NAMES = {"sklearn": "scikit-learn", "yaml": "pyyaml", "bert_score": "bert-score"}


def _normal(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _ci_distributions() -> set[str]:
    """The requirements of the extras CI installs (``all``, expanded, and ``dev``)."""
    # pyproject's extras table read by pattern: tomllib is not in Python 3.10's library
    text = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    table = text.split("[project.optional-dependencies]", 1)[1].split("\n[", 1)[0]
    extras = {
        m.group(1): re.findall(r'"([^"]+)"', re.sub(r"#.*", "", m.group(2)))
        for m in re.finditer(r"^([\w-]+) = \[(.*?)\]$", table, re.M | re.S)
    }
    wanted, todo = set(), ["all", "dev"]
    while todo:
        for req in extras[todo.pop()]:
            name = re.match(r"[A-Za-z0-9_.-]+", req)
            assert name is not None, req
            inner = re.fullmatch(r"rag-judge\[(.+)\]", req.replace(" ", ""))
            if inner:
                todo += inner.group(1).split(",")
            else:
                wanted.add(_normal(name.group(0)))
    return wanted


def _optional_imports(path: Path) -> set[str]:
    """Top-level modules a test file imports through ``pytest.importorskip`` or inside a
    ``try`` that catches ImportError."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "importorskip"
            and node.args
            and isinstance(node.args[0], ast.Constant)
        ):
            found.add(str(node.args[0].value).split(".")[0])
        if isinstance(node, ast.Try) and any(
            isinstance(h.type, ast.Name) and h.type.id in {"ImportError", "ModuleNotFoundError"}
            for h in node.handlers
        ):
            for inner in node.body:
                if isinstance(inner, ast.Import):
                    found |= {a.name.split(".")[0] for a in inner.names}
                elif isinstance(inner, ast.ImportFrom) and inner.module and not inner.level:
                    found.add(inner.module.split(".")[0])
    return found - {"rag_judge"}


def test_every_optional_test_import_is_installed_by_ci() -> None:
    installed = metadata.packages_distributions()
    wanted = _ci_distributions()
    missing = {}
    for path in sorted((ROOT / "tests").rglob("*.py")):
        for module in _optional_imports(path):
            names = installed.get(module) or [IMPORT_NAMES.get(module, module)]
            if not {_normal(n) for n in names} & wanted:
                missing[f"{path.relative_to(ROOT)}: {module}"] = names
    assert not missing, f"add to the dev extra (pyproject.toml): {missing}"


def test_the_reference_libraries_are_in_the_dev_extra() -> None:
    # scipy and scikit-learn came only as pytrec_eval-terrier's dependency, or not at all.
    assert {"scipy", "scikit-learn"} <= _ci_distributions()
