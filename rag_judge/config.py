"""ExperimentConfig: one YAML file describing a run, validated at load with file:line errors."""

from __future__ import annotations

import copy
import itertools
import re
from pathlib import Path
from types import UnionType
from typing import Annotated, Any, Literal, Union, get_args, get_origin

import yaml
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SerializeAsAny,
    ValidationError,
    field_validator,
    model_validator,
)

from rag_judge.analysis.gates import parse_threshold
from rag_judge.errors import ConfigError, format_loc, friendly_message, unknown_key_message
from rag_judge.evaluators import EVALUATORS, Evaluator, evaluator_class, validate_evaluators
from rag_judge.evaluators.retrieval import check_relevance_from, settle_retrieval
from rag_judge.llm.providers import ClientConfig
from rag_judge.stats.ppi import PPIMethod

__all__ = [
    "BootstrapConfig",
    "ExperimentConfig",
    "LabelsConfig",
    "RayConfig",
    "expand_matrix",
    "folder_name",
    "load_config",
    "load_experiments",
    "where",
]


class BootstrapConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    resamples: int = Field(default=1000, ge=0)
    confidence: float = Field(default=0.95, gt=0, lt=1)


class LabelsConfig(BaseModel):
    """Human labels of a slice of the samples, for the bias-corrected (PPI) estimates: a label
    file (``path``: JSONL or CSV, ``{"id": ..., "<metric>": label}``, as ``rag-judge
    calibrate`` and the report's review mode write them), or with ``column`` each sample's
    ``metadata[column]`` in the dataset (or in ``path``). ``pass_score``: a 1-5 rubric's
    verdict passes at a score >= it (the pass rate corrected by Rogan-Gladen). ``method``: how
    the estimates' intervals are computed, ``t`` (small-sample, valid down to 15 labels) or
    ``ppi_py`` (the reference package's normal interval). A bare string in the config is the
    ``path``."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    path: Path | None = None
    column: str | None = None
    pass_score: float = Field(default=4.0, ge=1, le=5)
    method: PPIMethod = PPIMethod.T

    @model_validator(mode="before")
    @classmethod
    def _bare_path(cls, value: Any) -> Any:
        return {"path": value} if isinstance(value, str | Path) else value

    @model_validator(mode="after")
    def _something(self) -> LabelsConfig:
        if self.path is None and self.column is None:
            raise ValueError("needs a 'path' (a label file) or a 'column' (in the dataset)")
        return self


class RayConfig(BaseModel):
    """Where ``executor: ray`` runs: ``address`` of an existing cluster (``ray://head:10001``,
    ``auto``; None: ``$RAY_ADDRESS``, else a new local cluster started for the run, never one
    already running on the machine), the number of ``shards`` the samples are split into
    (None: the cluster's CPUs), how long joining a cluster may take (``connect_timeout``,
    seconds) and how many times a shard whose worker died is run again (``retries``)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    address: str | None = None
    shards: int | None = Field(default=None, ge=1)
    connect_timeout: float = Field(default=60.0, gt=0)
    retries: int = Field(default=3, ge=0)


class ExperimentConfig(BaseModel):
    """A run: which dataset, which evaluators with which options, where the report goes.

    Relative paths are resolved against the config file's folder by :func:`load_config`.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = "experiment"
    dataset: Path | None = None
    dataset_format: Literal["jsonl", "csv", "parquet"] | None = None  # None: from the extension
    dataset_layout: Literal["rag-judge", "ragas"] | None = None  # None: from the column names
    # A live system to evaluate: "package.module:function" or "file.py:function", called with
    # each question; its answers and contexts replace the dataset's.
    target: str | None = None
    target_concurrency: int = Field(default=4, ge=1)
    target_timeout: float | None = Field(default=None, gt=0)
    output_dir: Path | None = None
    # The model that generated the answers (a sample's metadata["generator"] overrides it):
    # the judge audit flags self-preference when it is of the judge's model family.
    generator: str | None = None
    labels: LabelsConfig | None = None  # human labels of a slice: bias-corrected estimates
    seed: int = 0
    bootstrap: BootstrapConfig = Field(default_factory=BootstrapConfig)
    # Each a registered type, a 'package.module:Class' path, or an Evaluator instance.
    evaluators: list[SerializeAsAny[Evaluator]] = Field(min_length=1)
    # CI gates checked after the run: metric -> "OP VALUE" (a bare number means ">=").
    gates: dict[str, str | float] = Field(default_factory=dict)
    # `rag-judge run` exits 3 when more than this share of any evaluator's values failed
    # (errors, unscored verdicts, missing inputs), and whatever it is set to, when an evaluator
    # produced no value at all; the default, 1.0, fails only the latter.
    max_error_rate: float = 1.0
    # Where the evaluators run: "local" (this process) or "ray" (contiguous shards of the
    # samples as Ray tasks; needs the rag-judge[ray] extra). `ray` says which cluster.
    executor: Literal["local", "ray"] = "local"
    ray: RayConfig = Field(default_factory=RayConfig)
    # Samples an evaluator takes at a time: memory holds one chunk of samples, not the dataset.
    chunk_size: int = Field(default=2000, ge=1)
    # report.json holds the samples inline up to this many; past it they are written to
    # samples.jsonl beside it, and only score columns stay in memory.
    inline_samples: int = Field(default=5000, ge=0)

    @field_validator("max_error_rate")
    @classmethod
    def _valid_rate(cls, rate: float) -> float:
        if not 0.0 <= rate <= 1.0:  # NaN fails too
            raise ValueError(
                f"max_error_rate must be between 0 and 1 (the share of an evaluator's values "
                f"that may fail, e.g. 0.05), got {rate:g}"
            )
        return rate

    @field_validator("gates")
    @classmethod
    def _valid_gates(cls, gates: dict[str, str | float]) -> dict[str, str | float]:
        for metric, expr in gates.items():
            parse_threshold(expr, metric=metric)  # raises, naming the legal operators
        return gates

    @field_validator("evaluators", mode="before")
    @classmethod
    def _evaluators(cls, value: Any) -> Any:
        return validate_evaluators(value)  # the registry is read now, not at import

    @field_validator("evaluators")
    @classmethod
    def _distinct_metrics(cls, evaluators: list[Evaluator]) -> list[Evaluator]:
        evaluators = settle_retrieval(evaluators)  # before the clash check: it drops a twin
        seen: dict[str, int] = {}
        for i, ev in enumerate(evaluators):
            for metric in ev.metric_names():
                if metric in seen:
                    raise ValueError(
                        f"metric {metric!r} is produced by evaluators[{seen[metric]}] and "
                        f"evaluators[{i}]; give one of them a different metric list"
                    )
                seen[metric] = i
        check_relevance_from(evaluators)
        return evaluators


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
            variant["target"] = str(path.parent / target)  # a file next to the config
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


def _read_yaml(path: Path) -> tuple[dict[str, Any], yaml.Node | None]:
    if path.is_dir():  # else an IsADirectoryError (a traceback), or on Windows a PermissionError
        found = sorted(p.name for p in path.glob("*.y*ml"))
        inside = f" (it holds {', '.join(found)})" if found else ""
        raise ConfigError(f"{path}: is a folder, not a YAML config file{inside}")
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(f"{path}: file not found") from None
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
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: a config is a YAML mapping of keys to values")
    return data, root


def _describe(
    exc: ValidationError, path: Path, root: yaml.Node | None, raw: dict[str, Any] | None = None
) -> str:
    """``file:line: key.path: message`` for each problem. An unknown key is named with the
    closest legal key and the legal keys at its level (found by walking the model classes along
    its location in ``raw``, the mapping validated); the value is never echoed."""
    problems = []
    for err in exc.errors(include_url=False):
        loc = tuple(err["loc"])
        msg = friendly_message(err)
        unknown = err["type"] == "extra_forbidden"
        if unknown:
            msg = _unknown_key(str(loc[-1]), _legal_keys(loc[:-1], raw), _elsewhere(loc))
        elif loc == ("evaluators",) and err["type"] == "too_short":
            msg = f"give at least one evaluator; valid types: {', '.join(EVALUATORS)}"
        line = _line_of(root, loc, at_key=unknown)
        where = f"{path}:{line}" if line else str(path)
        key = format_loc(loc)
        problems.append(f"{where}: {key}: {msg}" if key else f"{where}: {msg}")
    return "\n".join(problems)


def where(path: str | Path, loc: tuple[int | str, ...]) -> str:
    """``file:line`` of the key at ``loc`` in a YAML config (of its nearest existing parent key
    when it is absent, e.g. the ``client`` key for ``client.api_key_env``); just the file when
    no line is known."""
    try:
        root = yaml.compose(Path(path).read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError):
        return str(path)
    line = _key_line(root, loc)
    return f"{path}:{line}" if line else str(path)


def _key_line(node: yaml.Node | None, loc: tuple[int | str, ...]) -> int | None:
    """1-based line of the deepest key (or list item) along ``loc`` that the YAML has."""
    line = None
    for part in loc:
        if isinstance(node, yaml.MappingNode):
            found = [(k, v) for k, v in node.value if k.value == part]
            if not found:
                break
            key, node = found[0]
            line = key.start_mark.line + 1
        elif isinstance(node, yaml.SequenceNode) and isinstance(part, int):
            if not 0 <= part < len(node.value):
                break
            node = node.value[part]
            line = node.start_mark.line + 1
        else:
            break
    return line


def _elsewhere(loc: tuple[int | str, ...]) -> str | None:
    """Where a key unknown at ``loc`` is legal, if it is at another level of a config: a
    top-level key, an evaluator option, a ``client`` or ``bootstrap`` option."""
    key, level = loc[-1], loc[:-1]
    evaluator_level = len(level) == 2 and level[0] == "evaluators"
    places = []
    if level and (key in ExperimentConfig.model_fields or key == "matrix"):
        places.append("a top-level key (no indentation)")
    if not evaluator_level:
        types = [t for t, cls in EVALUATORS.items() if key in cls.model_fields and key != "type"]
        if types:
            places.append(
                f"an option of an evaluator (an item of evaluators) of type {', '.join(types)}"
            )
    if level[-1:] != ("client",) and key in ClientConfig.model_fields:
        places.append("an option of a judge's client (client: {...})")
    if level[-1:] != ("bootstrap",) and key in BootstrapConfig.model_fields:
        places.append("an option of bootstrap (bootstrap: {...})")
    return f"it is {' or '.join(places)}" if places else None


def _unknown_key(key: str, legal: list[str] | None, elsewhere: str | None = None) -> str:
    if elsewhere:  # a key at the wrong level: say where it belongs, not a near miss here
        msg = f"unknown key {key!r} here: {elsewhere}"
        return f"{msg}; legal keys here: {', '.join(legal)}" if legal else msg
    return unknown_key_message(key, legal)


def _legal_keys(loc: tuple[int | str, ...], raw: Any) -> list[str] | None:
    """The keys the mapping at ``loc`` of a raw config may hold, or None where that is not
    known: the fields (by alias) of the model class found by walking ``ExperimentConfig``'s
    annotations along ``loc``; an evaluator's class is looked up from its ``type``."""
    annotation: Any = ExperimentConfig
    node: Any = raw
    for part in loc:
        model = _model_of(annotation, node)
        if model is not None and isinstance(part, str):
            field = next(
                (f for name, f in model.model_fields.items() if part in (name, f.alias)), None
            )
            if field is None:
                return None
            annotation = field.annotation
        elif isinstance(part, int) and get_origin(_unwrap(annotation)) in (list, tuple):
            args = [a for a in get_args(_unwrap(annotation)) if a is not Ellipsis]
            if len(args) != 1:
                return None
            annotation = args[0]
        else:
            return None
        node = _child_of(node, part)
    model = _model_of(annotation, node)
    if model is None:
        return None
    keys = [f.alias or name for name, f in model.model_fields.items()]
    return [*keys, "matrix"] if model is ExperimentConfig else keys


def _unwrap(annotation: Any) -> Any:
    while get_origin(annotation) is Annotated:  # SerializeAsAny[X] and Field metadata
        annotation = get_args(annotation)[0]
    return annotation


def _model_of(annotation: Any, node: Any) -> type[BaseModel] | None:
    """The model class an annotation (or one member of a union) names; for an evaluator, the
    class the raw mapping's ``type`` names."""
    annotation = _unwrap(annotation)
    if get_origin(annotation) in (Union, UnionType):
        members = [_model_of(a, node) for a in get_args(annotation)]
        return next((m for m in members if m is not None), None)
    if not (isinstance(annotation, type) and issubclass(annotation, BaseModel)):
        return None
    if issubclass(annotation, Evaluator):
        try:
            return evaluator_class(node.get("type") if isinstance(node, dict) else None)
        except ValueError:
            return None
    return annotation


def _child_of(node: Any, part: int | str) -> Any:
    if isinstance(node, dict):
        return node.get(part)
    if isinstance(node, list) and isinstance(part, int) and 0 <= part < len(node):
        return node[part]
    return None


def _line_of(
    node: yaml.Node | None, loc: tuple[int | str, ...], *, at_key: bool = False
) -> int | None:
    """1-based line of the YAML node at ``loc``, or of its nearest existing parent; with
    ``at_key``, of the last key itself rather than its value (an unknown key)."""
    if node is None:
        return None
    line = node.start_mark.line + 1
    for depth, part in enumerate(loc, start=1):
        child = None
        if isinstance(node, yaml.MappingNode):
            keys = [(k, v) for k, v in node.value if k.value == part]
            if keys:
                child = keys[0][0] if at_key and depth == len(loc) else keys[0][1]
        elif (
            isinstance(node, yaml.SequenceNode) and isinstance(part, int) and part < len(node.value)
        ):
            child = node.value[part]
        if child is None:
            break
        node, line = child, child.start_mark.line + 1
    return line


# ---- variant matrices ----------------------------------------------------------------------
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
