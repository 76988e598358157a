"""A user's own evaluator, importable by path (``tests.evaluators.custom:ExactMatch``)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar, Literal

from rag_judge import Evaluator, Sample


class ExactMatch(Evaluator):
    """1.0 when the answer equals one of the references (after ``strip``, optionally
    case-folded), else 0.0."""

    type: Literal["exact_match"] = "exact_match"
    needs: ClassVar[tuple[str, ...]] = ("answer", "references")
    casefold: bool = False

    def metric_names(self) -> list[str]:
        return ["exact_match"]

    def score(self, samples: Sequence[Sample]) -> dict[str, list[float]]:
        def norm(text: str) -> str:
            return text.strip().casefold() if self.casefold else text.strip()

        return {
            "exact_match": [
                float(any(norm(s.answer or "") == norm(r) for r in s.references)) for s in samples
            ]
        }
