"""One sample's grounding outcome → its metrics, failures and judgment (pure; the evaluator in
:mod:`rag_judge.evaluators.grounding.evaluator` asks the judge and hands the replies here).

The rules, in one place (``docs/grounding.md`` shows them as a table):

- no answer, or a blank one: every metric is a missing input (as for ``type: judge``; a blank
  answer is not a deliberate refusal);
- claims could not be read (after the re-ask) or the call failed: every metric fails with why;
- the answer abstains: ``claims`` is 0, ``answer_rate`` 0, ``over_refusal_rate`` 1 on an
  answerable question, ``unsupported_answer_rate`` 0 on an unanswerable one; the claim and
  citation metrics do not apply (``not_applicable``: never NaN, never a silent 1);
- the answer answers: ``answer_rate`` 1, ``over_refusal_rate`` 0 on an answerable question,
  ``unsupported_answer_rate`` 1 on an unanswerable one; the claim metrics come from the
  verdicts (unscored when those could not be read; missing input without contexts), and a
  claim never judged is ``unchecked``, never ``unsupported``;
- a rate whose condition the sample does not meet (or does not state: no ``answerable``)
  does not apply to it.

Citations are read from the answer, never from the judge's claim texts: each claim is mapped
to the answer sentence it came from (:func:`rag_judge.text.source_sentences`) and cites that
sentence's markers. ``mode: any`` scores them per claim (:func:`rag_judge.metrics.grounding.
grounding`), ``mode: alce`` per sentence from the judge's ALCE replies (``alce_citations``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from rag_judge.data.sample import Sample
from rag_judge.judge.grounding.claims import ClaimList, ClaimVerdict, StatementVerdict
from rag_judge.judge.grounding.rounds import CitationOptions, answer_missing, statements
from rag_judge.judge.verdicts import Unscored
from rag_judge.llm.base import LLMError
from rag_judge.metrics.grounding import Claim, Statement, alce_citations, grounding
from rag_judge.report.model import (
    UNCHECKED,
    ClaimJudgment,
    Failure,
    FailureKind,
    GroundingJudgment,
)
from rag_judge.text import (
    Citations,
    sentence_spans,
    source_sentences,
)

__all__ = [
    "CITATION_METRICS",
    "CLAIM_METRICS",
    "RATE_METRICS",
    "CitationOptions",
    "Scored",
    "answer_missing",
    "score_sample",
    "statements",
]

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
Checked = list[ClaimVerdict] | Unscored | LLMError | None
Supported = list[StatementVerdict] | Unscored | LLMError | None  # the ALCE round's outcome
CitationMode = Literal["any", "alce"]


@dataclass
class Scored:
    """A sample's values (None where it has none), failures and grounding judgment."""

    values: dict[str, float | None] = field(default_factory=dict)
    failures: dict[str, Failure] = field(default_factory=dict)
    judgment: GroundingJudgment | None = None

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
    checked: Checked,
    citations: CitationOptions | None,
    *,
    supported: Supported = None,
    attempts: int = 0,
    cached: bool = False,
    raw: str = "",
) -> Scored:
    """The grounding metrics of one sample (see the module's rules). ``split`` is its claim
    list (or why there is none), ``checked`` its claims' verdicts (None: not asked),
    ``supported`` the ALCE replies on its cited sentences (``mode: alce``; None: not asked)."""
    out = Scored()
    seen: dict[str, Any] = {"raw": raw, "attempts": attempts, "cached": cached}
    missing = answer_missing(sample)
    if missing is not None:
        for m in metrics:
            out.set(m, None, missing)
        return out
    if not isinstance(split, ClaimList):
        for m in metrics:
            out.set(m, None, _failure(split, "claims"))
        out.judgment = GroundingJudgment(
            score=None, reason=out.failures[metrics[0]].message, **seen
        )
        return out
    _rates(out, split.abstention, sample.answerable)
    if split.abstention:
        out.set("claims", 0.0)
        for m in metrics:
            if m not in out.values:
                out.set(m, None, _na("the answer abstains"))
        reason = "the answer abstains"
        out.judgment = GroundingJudgment(
            score=None, reason=reason, abstained=True, claims=[], **seen
        )
        return out
    out.set("claims", float(len(split.claims)))
    if not split.claims:
        why: Failure | None = _na("the answer makes no claim")
    elif not sample.contexts:
        why = Failure(
            kind=FailureKind.MISSING_INPUT, message="field 'contexts' is missing or empty"
        )
    elif not isinstance(checked, list):
        why = _failure(checked, "claim verdicts")
    else:
        why = None
    claims = _claims(sample, split.claims, checked, citations, why)
    if why is None:
        _metrics(out, claims, len(sample.contexts), citations)
        if citations is not None and citations.mode == "alce":
            _alce(out, sample, citations, supported)
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
    out.judgment = GroundingJudgment(
        score=support, reason=reason, abstained=False, claims=claims, **seen
    )
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
    checked: Checked,
    citations: CitationOptions | None,
    why: Failure | None,
) -> list[ClaimJudgment]:
    """The claims with their verdicts (``unchecked``, the reason saying why, when ``why``
    says none came), the answer sentence each came from, that sentence's citations, and
    where the claim sits in the answer when it is there verbatim."""
    ids = [c.id for c in sample.contexts]
    answer = sample.answer or ""
    reader = citations.reader() if citations is not None else Citations()
    sentences = [answer[a:b] for a, b in sentence_spans(answer)]
    sources = source_sentences(
        [reader.strip(t) for t in texts], [reader.strip(s) for s in sentences]
    )
    out, start = [], 0
    for i, text in enumerate(texts):
        verdict = checked[i] if why is None and isinstance(checked, list) else None
        at = answer.find(text, start)
        span = (at, at + len(text)) if at >= 0 else None
        start = span[1] if span else start
        ranks = list(verdict.contexts) if verdict else []
        source = sources[i]
        cited = None
        if citations is not None:
            cited = list(reader.ranks(sentences[source], ids)) if source is not None else []
        out.append(
            ClaimJudgment(
                text=text,
                verdict=verdict.verdict if verdict else UNCHECKED,
                support=ranks,
                support_ids=[ids[r - 1] for r in ranks] if any(ids) else None,
                cited=cited,
                reason=verdict.reason if verdict else (why.text() if why else ""),
                span=span,
                sentence=source + 1 if source is not None else None,
            )
        )
    return out


def _metrics(
    out: Scored, claims: list[ClaimJudgment], retrieved: int, citations: CitationOptions | None
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
    required = citations is not None and citations.required
    g = grounding(kernel, retrieved, require_citations=required)
    out.set("claim_support", g.claim_support)
    out.set("claim_contradiction", g.claim_contradiction)
    if g.support_rank is not None:
        out.set("support_rank", float(g.support_rank))
    out.set("context_utilisation", g.context_utilisation)
    if citations is None:
        return
    uncited = _na("the answer carries no citation markers")
    if g.citation_recall is None:
        for m in CITATION_METRICS:
            out.set(m, None, uncited)
        return
    # g.claims > 0: score_sample calls this only for an answer with claims
    out.set("misattribution", g.misattributed / g.claims)
    if citations.mode == "alce":
        return  # recall and precision per sentence: _alce
    out.set("citation_recall", g.citation_recall)
    out.set("citation_precision", g.citation_precision, uncited)


def _alce(out: Scored, sample: Sample, citations: CitationOptions, supported: Supported) -> None:
    """ALCE's citation recall and precision from the judge's replies on the cited sentences
    (asked only for a sentence whose markers all name retrieved contexts)."""
    found = statements(sample, citations.reader())
    kernel = [Statement(cited) for _, cited in found]
    if any(s.checkable for s in kernel):
        if not isinstance(supported, list):
            failure = _failure(supported, "citation support")
            out.set("citation_recall", None, failure)
            out.set("citation_precision", None, failure)
            return
        replies = iter(supported)  # one per checkable sentence, in order: the parser checks
        for i, s in enumerate(kernel):
            if s.checkable:
                v = next(replies)
                kernel[i] = Statement(s.cited, v.entailed, v.alone, v.without)
    recall, precision = alce_citations(kernel, require_citations=citations.required)
    uncited = _na("the answer carries no citation markers")
    out.set("citation_recall", recall, uncited)
    if any(s.cited for s in kernel):  # ALCE counts no citation of a sentence citing nothing
        uncited = _na("every cited sentence cites a context that was not retrieved")
    out.set("citation_precision", precision, uncited)
