"""ExperimentConfig: one YAML file describing a run, validated at load with file:line errors."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import ValidationError

# The models, the YAML error messages and the matrices live in private modules (each file under
# ~400 lines); every public name is imported from here, as before.
from rag_judge.config._conversation import ConversationConfig
from rag_judge.config._matrix import expand_matrix, folder_name
from rag_judge.config._metric_names import check_metric_names, check_threshold_names
from rag_judge.config._models import BootstrapConfig, ExperimentConfig, LabelsConfig, RayConfig
from rag_judge.config._yaml import _describe, _read_yaml, where
from rag_judge.data.frameworks import split_framework
from rag_judge.errors import ConfigError
from rag_judge.evaluators import evaluator_class

__all__ = [
    "BootstrapConfig",
    "ConversationConfig",
    "ExperimentConfig",
    "LabelsConfig",
    "RayConfig",
    "check_metric_names",
    "check_threshold_names",
    "expand_matrix",
    "folder_name",
    "load_config",
    "load_experiments",
    "where",
]


def load_config(path: str | Path, overrides: dict[str, Any] | None = None) -> ExperimentConfig:
    """Load and validate a YAML config. Errors read ``file:line: key.path: message``.

    A config with a ``matrix`` is several experiments: use :func:`load_experiments`.
    """
    experiments = load_experiments(path, overrides)
    if len(experiments) != 1:
        raise ConfigError(f"{path}: defines a matrix of {len(experiments)} variants")
    return experiments[0][1]


def load_experiments(
    path: str | Path, overrides: dict[str, Any] | None = None
) -> list[tuple[str, ExperimentConfig]]:
    """Every experiment a YAML config defines, as (variant name, config); a config without a
    ``matrix`` is one experiment named "". Errors name the file, line, key and variant."""
    path = Path(path)
    data, root = _read_yaml(path)
    data.update(overrides or {})
    out = []
    for name, variant in expand_matrix(data, str(path)):
        # The dataset is found next to the config; the output goes under the working folder.
        if isinstance(variant.get("dataset"), str) and "dataset" not in (overrides or {}):
            variant["dataset"] = str(path.parent / variant["dataset"])
        if "labels" not in (overrides or {}):
            _resolve_labels(variant, path.parent)
        target = variant.get("target")
        if isinstance(target, str) and target.rpartition(":")[0].endswith(".py"):
            framework, target = split_framework(target)  # langchain:file.py:chain
            prefix = f"{framework}:" if framework else ""
            variant["target"] = prefix + str(path.parent / target)  # a file next to the config
        if isinstance(variant.get("conversation"), dict):
            conversation = dict(variant["conversation"])
            variant["conversation"] = ConversationConfig.resolve_paths(conversation, path.parent)
        if isinstance(variant.get("evaluators"), list):
            variant["evaluators"] = [
                _resolve_paths(ev, path.parent) for ev in variant["evaluators"]
            ]
        try:
            out.append((name, ExperimentConfig.model_validate(variant)))
        except ValidationError as exc:
            where = f" (variant {name})" if name else ""
            raise ConfigError(_describe(exc, path, root, variant) + where) from None
    return out


def _resolve_labels(variant: dict[str, Any], base: Path) -> None:
    """A label file named in the config is found next to it, as the dataset is."""
    labels = variant.get("labels")
    if isinstance(labels, str):
        labels = {"path": labels}
    if isinstance(labels, dict) and isinstance(labels.get("path"), str):
        variant["labels"] = {**labels, "path": str(base / labels["path"])}


def _resolve_paths(raw: Any, base: Path) -> Any:
    """An evaluator mapping with its file options made relative to the config's folder (an
    unknown type is left for validation to report)."""
    if not isinstance(raw, dict):
        return raw
    try:
        cls = evaluator_class(raw.get("type"))
    except ValueError:
        return raw
    return cls.resolve_paths(dict(raw), base)
