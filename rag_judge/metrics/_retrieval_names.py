"""Retrieval metric names: the families and their ``@`` parameters, ``parse_metric`` with errors
that list the legal names, and what a family means for the all-queries value (``aggregate``).

Apart from the kernels (``retrieval.py``) because config validation, the CLI and the evaluator
need a metric's name and aggregation before, and without, any ranking; ``retrieval.py``
re-exports every name here, which is where callers import them from.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from rag_judge.errors import ConfigError

# family -> its "@" parameter: a cut-off k required ("yes"), optional ("opt") or not allowed
# ("no"); a recall level in [0, 1] ("level", iprec@0.1); a multiple of R > 0 ("mult").
METRIC_FAMILIES: dict[str, str] = {
    "precision": "yes",
    "recall": "yes",
    "f1": "yes",
    "hit_rate": "yes",
    "mrr": "opt",
    "map": "opt",
    "r_precision": "no",
    "dcg": "opt",
    "idcg": "opt",
    "ndcg": "opt",
    "ndcg_exp": "opt",
    "bpref": "no",
    "infap": "no",
    "iprec": "level",
    "11pt_avg": "no",
    "set_precision": "no",
    "set_recall": "no",
    "set_f1": "no",
    "gm_map": "no",
    "rprec_mult": "mult",
    "num_rel": "no",
    "num_rel_ret": "no",
    "num_ret": "no",
    "judged": "yes",
}
_NO_THRESHOLD = {"dcg", "idcg", "ndcg", "ndcg_exp", "num_ret", "judged"}
GEOMETRIC = frozenset({"gm_map"})  # families whose all-queries value is exp(mean)
COUNTS = frozenset({"num_rel", "num_rel_ret", "num_ret"})  # all-queries value: the sum
_NAME = re.compile(r"^(?P<family>[a-z0-9_]+)(?:@(?P<k>[^@]*))?$")


@dataclass(frozen=True, order=True)
class MetricSpec:
    """A parsed metric name: a family and its parameter ``k``: a cut-off (None = the whole
    ranking), or a recall level (``iprec``) or multiple of R (``rprec_mult``)."""

    family: str
    k: int | float | None = None

    @property
    def name(self) -> str:
        if self.k is None:
            return self.family
        return (
            f"{self.family}@{self.k:g}" if isinstance(self.k, float) else f"{self.family}@{self.k}"
        )


def parse_metric(name: str) -> MetricSpec:
    """Parse ``"ndcg@10"`` into ``MetricSpec("ndcg", 10)``, with errors that list the legal set."""
    match = _NAME.match(name.strip().lower()) if isinstance(name, str) else None
    family = match.group("family") if match else None
    if match is None or family not in METRIC_FAMILIES:
        raise ConfigError(
            f"unknown retrieval metric {name!r}; valid metrics: {valid_metric_names()}"
        )
    need_k, raw_k = METRIC_FAMILIES[family], match.group("k")
    if raw_k is None:
        if need_k == "yes":
            raise ConfigError(f"metric {name!r} needs a cut-off, e.g. '{family}@10'")
        if need_k in {"level", "mult"}:
            example = {"level": "0.1", "mult": "0.2"}[need_k]
            raise ConfigError(f"metric {name!r} needs a parameter, e.g. '{family}@{example}'")
        return MetricSpec(family)
    if need_k == "no":
        raise ConfigError(f"metric {name!r} takes no cut-off; write '{family}'")
    if need_k in {"level", "mult"}:
        return MetricSpec(family, _real_param(name, raw_k, need_k))
    if not re.fullmatch(r"[+-]?\d+", raw_k) or int(raw_k) <= 0:
        raise ConfigError(f"metric {name!r}: k must be a positive integer, got {raw_k!r}")
    return MetricSpec(family, int(raw_k))


def _real_param(name: str, raw: str, kind: str) -> float:
    try:
        value = float(raw)
    except ValueError:
        value = math.nan
    if kind == "level" and not 0.0 <= value <= 1.0:
        raise ConfigError(f"metric {name!r}: the recall level must be in [0, 1], got {raw!r}")
    if kind == "mult" and not (value > 0 and math.isfinite(value)):
        raise ConfigError(f"metric {name!r}: the multiple of R must be > 0, got {raw!r}")
    return value


def valid_metric_names() -> str:
    forms = {"yes": "{0}@k", "opt": "{0}, {0}@k", "no": "{0}", "level": "{0}@R (R in [0, 1])",
             "mult": "{0}@X (X > 0)"}  # fmt: skip
    return ", ".join(forms[need].format(f) for f, need in METRIC_FAMILIES.items())


def as_spec(metric: MetricSpec | str) -> MetricSpec:
    """A spec as it is, a name parsed."""
    return metric if isinstance(metric, MetricSpec) else parse_metric(metric)


def uses_threshold(spec: MetricSpec | str) -> bool:
    """Whether the relevance threshold changes the metric's number."""
    return as_spec(spec).family not in _NO_THRESHOLD


def is_geometric(spec: MetricSpec | str) -> bool:
    """Whether the all-queries value is a geometric mean (gm_map), not a mean."""
    return as_spec(spec).family in GEOMETRIC


def is_count(spec: MetricSpec | str) -> bool:
    """Whether the metric is one of trec_eval's counts, whose all-queries value is the sum."""
    return as_spec(spec).family in COUNTS


def aggregate(spec: MetricSpec | str, values: NDArray[np.float64]) -> float:
    """The all-queries value as trec_eval prints it: the exact mean; for the counts (num_rel,
    num_rel_ret, num_ret) the sum, as trec_eval and pytrec_eval total them; for gm_map (whose
    per-query values are log AP, as pytrec_eval returns them) exp of the mean; NaN for none."""
    flat = np.asarray(values, dtype=np.float64).ravel().tolist()
    if not flat:
        return math.nan
    if is_count(spec):
        return math.fsum(flat)
    mean = math.fsum(flat) / len(flat)
    return math.exp(mean) if is_geometric(spec) else mean
