"""The audit of a pairwise run (``rag-judge audit --pairwise``): its position consistency,
from a ``rag-judge pairwise --format json`` output read back. A rubric run's audit is
``analysis.audit``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from rag_judge.errors import DataError
from rag_judge.judge.pairwise_result import PairOutcome, PairVerdict, PairwiseResult
from rag_judge.llm.base import Usage
from rag_judge.report.estimates import RubricAudit
from rag_judge.report.model import Signature

__all__ = ["audit_pairwise", "load_pairwise"]


def audit_pairwise(result: PairwiseResult) -> RubricAudit:
    """A pairwise run's audit: its position consistency (:attr:`PairwiseResult.
    position_consistency`), scored pairs and the share of pairs left unscored."""
    c = result.counts
    asked = c["n"] + c["unscored"]
    return RubricAudit(
        metric=result.rubric,
        n=c["n"],
        unscored_rate=c["unscored"] / asked if asked else None,
        position_consistency=result.position_consistency,
    )


def load_pairwise(path: str | Path) -> PairwiseResult:
    """A ``rag-judge pairwise --format json`` output read back."""
    path = Path(path)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        return PairwiseResult(
            rubric=str(data["rubric"]),
            signature=Signature.parse(str(data.get("signature", ""))),
            labels=(str(data["a"]), str(data["b"])),
            pairs=[_pair(p) for p in data["samples"]],
            only_a=list(data.get("only_a_ids", [])),
            only_b=list(data.get("only_b_ids", [])),
            win_rate=data.get("win_rate_b"),
            ci=(data.get("ci_low"), data.get("ci_high")),
            resamples=int(data.get("resamples", 0)),
            confidence=float(data.get("confidence", 0.95)),
            seed=int(data.get("seed", 0)),
            usage=Usage.model_validate(data.get("usage", {})),
        )
    except FileNotFoundError:
        raise DataError(f"{path}: file not found") from None
    except KeyError as exc:
        raise DataError(
            f"{path}: not a rag-judge pairwise JSON (no key {exc}; expected the output of "
            "`rag-judge pairwise --format json`)"
        ) from None
    except (ValueError, TypeError, AttributeError, ValidationError) as exc:
        raise DataError(
            f"{path}: not a rag-judge pairwise JSON ({exc}); expected the output of "
            "`rag-judge pairwise --format json`"
        ) from None


def _pair(row: dict[str, Any]) -> PairOutcome:
    outcome, consistent = row["outcome"], row["consistent"]
    if outcome not in ("A", "B", "tie", None) or consistent not in (True, False, None):
        raise ValueError(
            f"sample {row.get('id')!r}: outcome {outcome!r} / consistent {consistent!r}; "
            "expected an outcome of A, B, tie or null and consistent true, false or null"
        )
    return PairOutcome(
        id=str(row["id"]),
        outcome=outcome,
        consistent=consistent,
        reason=row.get("unscored_reason"),
        verdicts=[PairVerdict.model_validate(v) for v in row.get("verdicts", [])],
    )
