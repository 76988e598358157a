"""One sample's grounding outcome → its metrics, failures and judgment (pure; the evaluator in
:mod:`rag_judge.evaluators.grounding` asks the judge and hands the replies here).

The rules, in one place (``docs/grounding.md`` shows them as a table):

- no answer: every metric is a missing input;
- claims could not be read (after the re-ask) or the call failed: every metric fails with why;
- the answer abstains: ``claims`` is 0, ``answer_rate`` 0, ``over_refusal_rate`` 1 on an
  answerable question, ``unsupported_answer_rate`` 0 on an unanswerable one; the claim and
  citation metrics do not apply (``not_applicable``: never NaN, never a silent 1);
- the answer answers: ``answer_rate`` 1, ``over_refusal_rate`` 0 on an answerable question,
  ``unsupported_answer_rate`` 1 on an unanswerable one; the claim metrics come from the
  verdicts (unscored when those could not be read; missing input without contexts);
- a rate whose condition the sample does not meet (or does not state: no ``answerable``)
  does not apply to it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from rag_judge.data.sample import Sample
from rag_judge.judge.claims import ClaimList, ClaimVerdict
from rag_judge.judge.verdicts import Unscored
from rag_judge.llm.base import LLMError
from rag_judge.metrics.grounding import Claim, grounding
from rag_judge.report.model import ClaimJudgment, Failure, FailureKind, Judgment
from rag_judge.text import Citations

__all__ = ["CITATION_METRICS", "CLAIM_METRICS", "RATE_METRICS", "Scored", "score_sample"]

CLAIM_METRICS = (
    "claims",
    "claim_support",
    "claim_contradiction",
    "support_rank",
    "context_utilisation",
)
CITATION_METRICS = ("citation_recall", "citation_precision", "misattribution")
RATE_METRICS = ("answer_rate", "over_refusal_rate", "unsupported_answer_rate")

Found = ClaimList | Unscored | LLMError | None


@dataclass
class Scored:
    """A sample's values (None where it has none), failures and grounding judgment."""

    values: dict[str, float | None] = field(default_factory=dict)
    failures: dict[str, Failure] = field(default_factory=dict)
    judgment: Judgment | None = None

    def set(self, metric: str, value: float | None, why: Failure | None = None) -> None:
        self.values[metric] = value
        if value is None:
            self.failures[metric] = why or Failure(message="no value")


def _na(message: str) -> Failure:
    return Failure(kind=FailureKind.NOT_APPLICABLE, message=message)


def _failure(found: Unscored | LLMError | None, step: str) -> Failure:
    if isinstance(found, Unscored):
        return Failure(kind=FailureKind.UNSCORED, message=f"{step}: {found.reason}")
    return Failure(message=f"{step}: judge call failed: {found}")


def score_sample(
    sample: Sample,
    metrics: list[str],
    split: Found,
    checked: list[ClaimVerdict] | Unscored | LLMError | None,
    citations: Citations | None,
    *,
    require_citations: bool = False,
    attempts: int = 0,
    cached: bool = False,
    raw: str = "",
) -> Scored:
    """The grounding metrics of one sample (see the module's rules). ``split`` is its claim
    list (or why there is none), ``checked`` its claims' verdicts (None: not asked)."""
    out = Scored()
    seen: dict[str, Any] = {"raw": raw, "attempts": attempts, "cached": cached}
    if sample.answer is None:
        missing = Failure(kind=FailureKind.MISSING_INPUT, message="field 'answer' is missing")
        for m in metrics:
            out.set(m, None, missing)
        return out
    if not isinstance(split, ClaimList):
        for m in metrics:
            out.set(m, None, _failure(split, "claims"))
        out.judgment = Judgment(score=None, reason=out.failures[metrics[0]].message, **seen)
        return out
    _rates(out, split.abstention, sample.answerable)
    if split.abstention:
        out.set("claims", 0.0)
        for m in metrics:
            if m not in out.values:
                out.set(m, None, _na("the answer abstains"))
        reason = "the answer abstains"
        out.judgment = Judgment(score=None, reason=reason, abstained=True, claims=[], **seen)
        return out
    claims = _claims(sample, split.claims, checked, citations)
    out.set("claims", float(len(split.claims)))
    if not split.claims:
        why = _na("the answer makes no claim")
    elif not sample.contexts:
        why = Failure(
            kind=FailureKind.MISSING_INPUT, message="field 'contexts' is missing or empty"
        )
    elif not isinstance(checked, list):
        why = _failure(checked, "claim verdicts")
    else:
        why = None
        _metrics(out, claims, len(sample.contexts), citations, require_citations)
    for m in metrics:
        if m not in out.values:
            out.set(m, None, why or _na("no claim is supported"))
    support = out.values.get("claim_support")
    verdicts = [c.verdict for c in claims]
    if why is None:
        reason = ", ".join(f"{verdicts.count(v)} {v}" for v in _ORDER if v in verdicts)
        reason = f"{len(claims)} claims: {reason}" if claims else "no claims"
    else:
        reason = why.text()
    out.judgment = Judgment(score=support, reason=reason, abstained=False, claims=claims, **seen)
    return out


_ORDER = ("supported", "contradicted", "unsupported")


def _rates(out: Scored, abstained: bool, answerable: bool | None) -> None:
    out.set("answer_rate", 0.0 if abstained else 1.0)
    unstated = _na("the sample does not say whether it is answerable")
    if answerable is None:
        out.set("over_refusal_rate", None, unstated)
        out.set("unsupported_answer_rate", None, unstated)
    elif answerable:
        out.set("over_refusal_rate", 1.0 if abstained else 0.0)
        out.set("unsupported_answer_rate", None, _na("the question is answerable"))
    else:
        out.set("over_refusal_rate", None, _na("the question is unanswerable"))
        out.set("unsupported_answer_rate", 0.0 if abstained else 1.0)


def _claims(
    sample: Sample,
    texts: tuple[str, ...],
    checked: list[ClaimVerdict] | Unscored | LLMError | None,
    citations: Citations | None,
) -> list[ClaimJudgment]:
    """The claims with their verdicts (``unsupported`` placeholders, reason empty, when no
    verdicts came), citations and where each sits in the answer."""
    ids = [c.id for c in sample.contexts]
    answer = sample.answer or ""
    out, start = [], 0
    for i, text in enumerate(texts):
        verdict = checked[i] if isinstance(checked, list) else None
        at = answer.find(text, start)
        span = (at, at + len(text)) if at >= 0 else None
        start = span[1] if span else start
        ranks = list(verdict.contexts) if verdict else []
        out.append(
            ClaimJudgment(
                text=text,
                verdict=verdict.verdict if verdict else "unsupported",
                support=ranks,
                support_ids=[ids[r - 1] for r in ranks] if any(ids) else None,
                cited=list(citations.ranks(text, ids)) if citations else None,
                reason=verdict.reason if verdict else "",
                span=span,
            )
        )
    return out


def _metrics(
    out: Scored,
    claims: list[ClaimJudgment],
    retrieved: int,
    citations: Citations | None,
    require_citations: bool,
) -> None:
    kernel = [
        Claim(
            c.text,
            c.verdict,  # type: ignore[arg-type]  # one of CLAIM_VERDICTS: the judge's parser checks
            # a contradicting context does not support: only supported claims carry ranks
            support=tuple(c.support) if c.verdict == "supported" else (),
            cited=tuple(c.cited or ()),
        )
        for c in claims
    ]
    g = grounding(kernel, retrieved, require_citations=require_citations)
    out.set("claim_support", g.claim_support)
    out.set("claim_contradiction", g.claim_contradiction)
    if g.support_rank is not None:
        out.set("support_rank", float(g.support_rank))
    out.set("context_utilisation", g.context_utilisation)
    if citations is None:
        return
    if g.citation_recall is None:
        for m in CITATION_METRICS:
            out.set(m, None, _na("the answer carries no citation markers"))
        return
    out.set("citation_recall", g.citation_recall)
    if g.citation_precision is None:
        out.set("citation_precision", None, _na("the answer carries no citation markers"))
    else:
        out.set("citation_precision", g.citation_precision)
    # g.claims > 0: score_sample calls this only for an answer with claims
    out.set("misattribution", g.misattributed / g.claims)
