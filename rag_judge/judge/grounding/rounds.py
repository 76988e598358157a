"""Asking a judge to ground answers: the requests of up to three rounds per chunk (the claim
lists, with ``split: judge``; the verdict of each claim against the retrieved contexts; with
``citations: {mode: alce}`` ALCE's questions on the cited sentences) and what came back, per
sample. Scoring what came back is :mod:`rag_judge.evaluators.grounding.score`.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, field_validator

from rag_judge.data.sample import Sample
from rag_judge.judge.asking import Outcome, ask_all
from rag_judge.judge.conversation import HISTORY, turn_records
from rag_judge.judge.grounding.claims import (
    CITATIONS_RUBRIC,
    CITATIONS_SCHEMA,
    CITATIONS_SHAPE,
    CLAIMS_RUBRIC,
    CLAIMS_SCHEMA,
    CLAIMS_SHAPE,
    VERDICTS_RUBRIC,
    VERDICTS_SCHEMA,
    VERDICTS_SHAPE,
    ClaimList,
    ClaimVerdict,
    StatementVerdict,
    read_claims,
    read_statements,
    read_verdicts,
)
from rag_judge.judge.prompts import PromptRenderer, neutralise
from rag_judge.judge.settings import JudgeSession
from rag_judge.judge.verdicts import Unscored
from rag_judge.llm.base import Completion, CompletionRequest, LLMError
from rag_judge.llm.engine import JudgeEngine
from rag_judge.report.model import Failure, FailureKind
from rag_judge.text import (
    DEFAULT_CITATION_PATTERN,
    Citations,
    claim_sentences,
    is_abstention,
    split_claims,
    states_something,
)

__all__ = [
    "CitationMode",
    "CitationOptions",
    "Grounded",
    "GroundingAsk",
    "Split",
    "answer_missing",
    "grounding_renderer",
    "statements",
]

CitationMode = Literal["any", "alce"]
Split = Literal["judge", "sentences"]


class CitationOptions(BaseModel):
    """How citation markers are read: ``pattern``'s group 1 holds the keys (``[1]``, ``[d3]``,
    ``[1, 3]`` by default); ``refers_to`` maps a key to a context by ``rank``, by ``id``, or
    ``auto`` (id first, then rank). ``required``: an answer without markers scores citation
    recall 0 (ALCE) instead of having no citation metrics. ``mode``: ``any`` (per claim: one
    cited context supporting it on its own recalls it) or ``alce`` (ALCE's definitions, per
    sentence: the cited set must jointly entail it, a citation must be needed)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    pattern: str = DEFAULT_CITATION_PATTERN
    refers_to: Literal["auto", "rank", "id"] = "auto"
    required: bool = False
    mode: CitationMode = "any"

    @field_validator("pattern")
    @classmethod
    def _compiles(cls, value: str) -> str:
        try:
            compiled = re.compile(value)
        except re.error as exc:
            raise ValueError(f"pattern {value!r} is not a regular expression: {exc}") from None
        if compiled.groups > 1:
            raise ValueError(f"pattern {value!r}: use one group, around the marker's keys")
        return value

    def reader(self) -> Citations:
        return Citations(self.pattern, self.refers_to)


def answer_missing(sample: Sample) -> Failure | None:
    """A ``missing_input`` failure for a sample with no answer or a blank one, else None."""
    if sample.answer is None:
        return Failure(kind=FailureKind.MISSING_INPUT, message="field 'answer' is missing")
    if not sample.answer.strip():
        return Failure(kind=FailureKind.MISSING_INPUT, message="field 'answer' is empty")
    return None


def statements(sample: Sample, reader: Citations) -> list[tuple[str, tuple[int, ...]]]:
    """ALCE's statements: the answer's sentences that state something, each without its
    markers and with the ranks they cite (0: a key naming nothing retrieved)."""
    ids = [c.id for c in sample.contexts]
    out = []
    for sentence in split_claims(sample.answer or ""):
        text = reader.strip(sentence)
        if states_something(text):
            out.append((text, reader.ranks(sentence, ids)))
    return out


@dataclass
class Grounded:
    """What the judge said of one sample's answer, round by round (None: not asked)."""

    sample: Sample
    split: ClaimList | Unscored | LLMError | None = None
    checked: list[ClaimVerdict] | Unscored | LLMError | None = None
    supported: list[StatementVerdict] | Unscored | LLMError | None = None  # ALCE's round
    attempts: int = 0
    cached: bool = True
    raw: str = ""

    def took(self, outcome: Outcome[Any]) -> None:
        self.attempts += outcome.attempts
        self.cached = self.cached and outcome.cached
        self.raw = outcome.raw


def grounding_renderer() -> PromptRenderer:
    """The three grounding prompts, compiled."""
    renderer = PromptRenderer()
    for rubric in (CLAIMS_RUBRIC, VERDICTS_RUBRIC, CITATIONS_RUBRIC):
        renderer.load(rubric)
    return renderer


class GroundingAsk:
    """The grounding rounds of one run, over ``session``'s judge."""

    def __init__(
        self,
        session: JudgeSession,
        renderer: PromptRenderer,
        split: Split,
        citations: CitationOptions | None,
    ) -> None:
        self.session, self.renderer = session, renderer
        self.split, self.citations = split, citations

    def _request(self, rubric: Any, variables: dict[str, Any], schema: Any) -> CompletionRequest:
        return self.session.judge.request(self.renderer.render(rubric, variables), schema)

    def claims_request(self, sample: Sample) -> CompletionRequest:
        variables: dict[str, Any] = {"question": neutralise(sample.question or ""),
                                     "answer": neutralise(sample.answer or "")}  # fmt: skip
        if sample.history:  # a turn's claims may lean on the turns before it ("it", "that plan")
            variables[HISTORY] = turn_records(sample.history)
        return self._request(CLAIMS_RUBRIC, variables, CLAIMS_SCHEMA)

    def verdicts_request(self, sample: Sample, claims: Sequence[str]) -> CompletionRequest:
        reader = self.citations.reader() if self.citations is not None else Citations()
        variables = {
            "question": neutralise(sample.question or ""),
            "contexts": [
                {"rank": r, "text": neutralise(c.text)} for r, c in enumerate(sample.contexts, 1)
            ],
            # the verifier judges what a claim says, not where it says it comes from
            "claims": [neutralise(reader.strip(c)) for c in claims],
        }
        return self._request(VERDICTS_RUBRIC, variables, VERDICTS_SCHEMA)

    def alce(self, sample: Sample) -> list[tuple[str, tuple[int, ...]]]:
        """The sentences ALCE's round asks about: those whose markers all name retrieved
        contexts (none unless ``citations: {mode: alce}``)."""
        if self.citations is None or self.citations.mode != "alce":
            return []
        found = statements(sample, self.citations.reader())
        return [(text, cited) for text, cited in found if cited and 0 not in cited]

    def citations_request(
        self, sample: Sample, asked: list[tuple[str, tuple[int, ...]]]
    ) -> CompletionRequest:
        shown = sorted({r for _, cited in asked for r in cited})
        variables = {
            "question": neutralise(sample.question or ""),
            "contexts": [
                {"rank": r, "text": neutralise(sample.contexts[r - 1].text)} for r in shown
            ],
            "statements": [{"text": neutralise(t), "cited": list(c)} for t, c in asked],
        }
        return self._request(CITATIONS_RUBRIC, variables, CITATIONS_SCHEMA)

    @staticmethod
    def sentences(answer: str) -> ClaimList:
        """``split: sentences``: the answer's sentences, and the phrase rule for abstention."""
        abstains = is_abstention(answer)
        return ClaimList(abstention=abstains, claims=() if abstains else claim_sentences(answer))

    async def ask(self, engine: JudgeEngine, samples: Sequence[Sample]) -> list[Grounded]:
        """Every round of one chunk over ``engine``."""
        reask = self.session.judge.reask
        states = [Grounded(s) for s in samples]
        answered = [st for st in states if answer_missing(st.sample) is None]
        if self.split == "sentences":
            for st in answered:
                st.split = self.sentences(st.sample.answer or "")
        else:
            requests = [self.claims_request(st.sample) for st in answered]
            outcomes = await ask_all(engine, requests, read_claims, shape=CLAIMS_SHAPE,
                                     reask=reask, label="grounding claims")  # fmt: skip
            for st, o in zip(answered, outcomes, strict=True):
                st.split = o.result
                st.took(o)
        todo = [
            st
            for st in answered
            if isinstance(st.split, ClaimList) and st.split.claims and st.sample.contexts
        ]
        requests, parsers = [], []
        for st in todo:
            claims = st.split.claims  # type: ignore[union-attr]
            requests.append(self.verdicts_request(st.sample, claims))
            parsers.append(_verdict_reader(len(claims), len(st.sample.contexts)))
        outcomes2 = await ask_all(engine, requests, parsers, shape=VERDICTS_SHAPE,
                                  reask=reask, label="grounding verdicts")  # fmt: skip
        for st, checked in zip(todo, outcomes2, strict=True):
            st.checked = checked.result
            st.took(checked)
        # ALCE's questions only where the claims were judged (else no citation metric)
        asking = [(st, self.alce(st.sample)) for st in todo if isinstance(st.checked, list)]
        asking = [(st, asked) for st, asked in asking if asked]
        requests = [self.citations_request(st.sample, asked) for st, asked in asking]
        readers = [_statement_reader([c for _, c in asked]) for _, asked in asking]
        outcomes3 = await ask_all(engine, requests, readers, shape=CITATIONS_SHAPE,
                                  reask=reask, label="grounding citations")  # fmt: skip
        for (st, _), supported in zip(asking, outcomes3, strict=True):
            st.supported = supported.result
            st.took(supported)
        return states

    def first_requests(self, samples: Sequence[Sample]) -> tuple[list[CompletionRequest], int]:
        """What ``ask`` would send first, and how many samples it skips for a missing answer:
        with ``split: judge`` one claims request per answer, and one verdict request per
        answer that makes claims, estimated from its sentences (the claims the judge will
        return are not known before it does), and ALCE's request on its cited sentences."""
        requests = []
        skipped = 0
        for sample in samples:
            if sample.answer is None or answer_missing(sample) is not None:
                skipped += 1
                continue
            if self.split == "judge":
                requests.append(self.claims_request(sample))
            split = self.sentences(sample.answer)
            if split.claims and sample.contexts:
                requests.append(self.verdicts_request(sample, split.claims))
                asked = self.alce(sample)
                if asked:
                    requests.append(self.citations_request(sample, asked))
        return requests, skipped


def _verdict_reader(
    claims: int, contexts: int
) -> Callable[[Completion], list[ClaimVerdict] | Unscored]:
    return lambda reply: read_verdicts(reply, claims, contexts)


def _statement_reader(
    cited: list[tuple[int, ...]],
) -> Callable[[Completion], list[StatementVerdict] | Unscored]:
    return lambda reply: read_statements(reply, cited)
