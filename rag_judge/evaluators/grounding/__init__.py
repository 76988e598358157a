"""Claim-level grounding (``type: grounding``), the evaluator's side: its config, signatures and
run (``evaluator.py``) and one sample's outcome as metrics, failures and a judgment
(``score.py``, pure). The judge's rounds are :mod:`rag_judge.judge.grounding`."""

from rag_judge.evaluators.grounding.evaluator import (
    CitationOptions,
    GroundingEvaluator,
    GroundingRun,
)

__all__ = ["CitationOptions", "GroundingEvaluator", "GroundingRun"]
