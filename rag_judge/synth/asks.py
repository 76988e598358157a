"""What ``rag-judge synth`` asks the judge: a question of a kind from seed chunks, a 0-3 grade
of a chunk for a question (UMBRELA), and an answer without any documents (closed book).

Each prompt is a template in ``prompts/`` (``_synth_question.j2``, ``_synth_grade.j2``,
``_synth_closed_book.j2``), compiled and hashed as a rubric's is; chunk texts and questions sit
in delimited sections. Replies are JSON objects with exactly the fields of :class:`Generated`,
:class:`Grade` or :class:`ClosedBook`, read leniently (fences, text around the object, single
quotes). A reply that will not read is re-asked ``reask`` times, then is an ``Unscored`` with
the reason; a call that failed for good is its ``LLMError``. docs/synth.md has the rules.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Literal, TypeVar, get_args

from pydantic import BaseModel, ConfigDict, Field

from rag_judge.judge.asking import Outcome, ask_all
from rag_judge.judge.prompts import PromptRenderer
from rag_judge.judge.reply_json import FENCE, braced, lenient_loads
from rag_judge.judge.rubrics import Rubric
from rag_judge.judge.settings import JudgeSession
from rag_judge.judge.verdicts import Unscored
from rag_judge.llm.base import Completion, CompletionRequest, LLMError
from rag_judge.llm.engine import JudgeEngine
from rag_judge.text import is_abstention

if TYPE_CHECKING:
    from rag_judge.synth.corpus import Chunk

__all__ = [
    "CLOSED_BOOK_SCHEMA",
    "GRADES",
    "GRADE_SCHEMA",
    "KINDS",
    "QUESTION_SCHEMA",
    "SEEDS",
    "ClosedBook",
    "FollowUp",
    "Generated",
    "Grade",
    "Kind",
    "SynthAsk",
    "read_closed_book",
    "read_generated",
    "read_grade",
]

Kind = Literal["factual", "multi_hop", "comparison", "conversational", "unanswerable"]
KINDS: tuple[Kind, ...] = get_args(Kind)
# How many seed chunks a question of each kind is written from. An unanswerable question's
# one chunk shows the topic; the question asks what the corpus does not say.
SEEDS: dict[Kind, int] = {
    "factual": 1,
    "multi_hop": 2,
    "comparison": 2,
    "conversational": 1,
    "unanswerable": 1,
}
GRADES = (0, 1, 2, 3)  # UMBRELA's scale

_FROZEN = ConfigDict(frozen=True)


class FollowUp(BaseModel):
    """The second turn of a conversational item: a question that only makes sense after the
    first one, and its answer."""

    model_config = _FROZEN

    question: str
    answer: str


class Generated(BaseModel):
    """A question the judge wrote, its reference answer (None: unanswerable from the corpus)
    and, for a conversational item, the follow-up turn."""

    model_config = _FROZEN

    question: str
    answer: str | None
    follow_up: FollowUp | None = None


class Grade(BaseModel):
    """A chunk's relevance to a question on UMBRELA's scale: 0 nothing to do with it, 1 related
    but no answer, 2 some answer (unclear or partial), 3 dedicated to it with the exact answer."""

    model_config = _FROZEN

    grade: int = Field(ge=0, le=3)
    reason: str = ""


class ClosedBook(BaseModel):
    """The judge's answer to a question without any documents; None: it says it cannot."""

    model_config = _FROZEN

    answer: str | None


# The prompts as rubrics, so that the renderer compiles and hashes them like any other. Their
# inputs are not read: the templates take their own variables.
QUESTION_RUBRIC = Rubric(name="synth_question", inputs=("question",),
                         template="_synth_question.j2")  # fmt: skip
GRADE_RUBRIC = Rubric(name="synth_grade", inputs=("question",), template="_synth_grade.j2")
CLOSED_BOOK_RUBRIC = Rubric(name="synth_closed_book", inputs=("question",),
                            template="_synth_closed_book.j2")  # fmt: skip
_RUBRICS = {"question": QUESTION_RUBRIC, "grade": GRADE_RUBRIC, "closed_book": CLOSED_BOOK_RUBRIC}

# Strict structured output wants every property required and no extra keys: a field that may
# be absent is a required one that may be null.
_TURN: dict[str, Any] = {
    "type": "object",
    "properties": {"question": {"type": "string"}, "answer": {"type": "string"}},
    "required": ["question", "answer"],
    "additionalProperties": False,
}
QUESTION_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "question": {"type": "string"},
        "answer": {"type": ["string", "null"]},
        "follow_up": {"anyOf": [_TURN, {"type": "null"}]},
    },
    "required": ["question", "answer", "follow_up"],
    "additionalProperties": False,
}
GRADE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"reason": {"type": "string"}, "grade": {"type": "integer", "enum": [*GRADES]}},
    "required": ["reason", "grade"],
    "additionalProperties": False,
}
CLOSED_BOOK_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"answer": {"type": ["string", "null"]}},
    "required": ["answer"],
    "additionalProperties": False,
}
# One shape for every kind's re-ask: what a kind leaves null is in its own prompt.
_QUESTION_SHAPE = (
    '{"question": "<question>", "answer": "<answer>" or null, '
    '"follow_up": {"question": "<next question>", "answer": "<its answer>"} or null}'
)
_GRADE_SHAPE = '{"reason": "<one sentence>", "grade": <integer 0-3>}'
_CLOSED_BOOK_SHAPE = '{"answer": "<short answer>" or null}'


def _object(text: str, key: str) -> dict[str, Any] | Unscored:
    """The first JSON object in ``text`` that has ``key`` (whole text, fenced blocks, then
    balanced braces), or Unscored saying there is none."""
    if not text.strip():
        return Unscored(reason="empty reply", raw=text)
    chunks = [text, *(m.group(1) for m in FENCE.finditer(text)), *(c for c, _ in braced(text))]
    found = next((o for o in map(lenient_loads, chunks) if isinstance(o, dict) and key in o), None)
    if found is None:
        return Unscored(reason=f"no JSON object with {key!r} in the reply", raw=text)
    return found


def _text(value: Any) -> str | None:
    """A non-blank string, stripped; None for anything else."""
    return value.strip() if isinstance(value, str) and value.strip() else None


MIN_QUESTION_WORDS = 3


def read_generated(kind: Kind) -> Callable[[Completion], Generated | Unscored]:
    """The reader of a ``kind`` question's replies. A question is a non-blank string; so is
    its answer, except for an unanswerable question, whose answer must be null; a
    conversational item needs a follow-up with a question and an answer. Other kinds' follow-up
    is dropped: the item has one turn."""

    def read(completion: Completion) -> Generated | Unscored:
        text = completion.text
        found = _object(text, "question")
        if isinstance(found, Unscored):
            return found
        question, answer = _text(found["question"]), found.get("answer")
        if question is None:
            return Unscored(reason="'question' must be a non-empty string", raw=text, stated=True)
        if len(question.split()) < MIN_QUESTION_WORDS and not question.endswith("?"):
            # A fragment ("PASSAGE 1", a keyword) is no question: a small model writes such.
            problem = (
                f"'question' must be a question: {MIN_QUESTION_WORDS} words or more, or "
                "ending with '?'"
            )
            return Unscored(reason=problem, raw=text, stated=True)
        if kind == "unanswerable":
            if answer is not None:
                problem = "an unanswerable question's 'answer' must be null"
                return Unscored(reason=problem, raw=text, stated=True)
            return Generated(question=question, answer=None)
        if _text(answer) is None:
            return Unscored(reason="'answer' must be a non-empty string", raw=text, stated=True)
        if kind != "conversational":
            return Generated(question=question, answer=_text(answer))
        follow = found.get("follow_up")
        follow = follow if isinstance(follow, dict) else {}
        turn = (_text(follow.get("question")), _text(follow.get("answer")))
        if None in turn:
            problem = "'follow_up' must be an object with a non-empty 'question' and 'answer'"
            return Unscored(reason=problem, raw=text, stated=True)
        follow_up = FollowUp(question=str(turn[0]), answer=str(turn[1]))
        return Generated(question=question, answer=_text(answer), follow_up=follow_up)

    return read


def read_grade(completion: Completion) -> Grade | Unscored:
    """A grade of 0-3 from a reply. The grade must be a JSON integer (``2.0`` counts as 2):
    a string ``"2"``, ``2.5`` or 4 is Unscored, not rounded or clipped into a grade."""
    text = completion.text
    found = _object(text, "grade")
    if isinstance(found, Unscored):
        return found
    grade = found["grade"]
    if isinstance(grade, float) and grade.is_integer():
        grade = int(grade)
    if isinstance(grade, bool) or not isinstance(grade, int) or grade not in GRADES:
        problem = f"'grade' must be an integer 0-3, not {grade!r}"
        return Unscored(reason=problem, raw=text, stated=True)
    reason = found.get("reason")
    return Grade(grade=grade, reason=reason.strip() if isinstance(reason, str) else "")


def read_closed_book(completion: Completion) -> ClosedBook | Unscored:
    """A closed-book answer: a string, or null when the judge cannot answer. A blank string
    or one that declines (``rag_judge.text.is_abstention``: "I don't know") is null too."""
    text = completion.text
    found = _object(text, "answer")
    if isinstance(found, Unscored):
        return found
    answer = found["answer"]
    if answer is not None and not isinstance(answer, str):
        reason = f"'answer' must be a string or null, not {answer!r}"
        return Unscored(reason=reason, raw=text, stated=True)
    if answer is None or is_abstention(answer):
        return ClosedBook(answer=None)
    return ClosedBook(answer=answer.strip())


R = TypeVar("R")


def _results(outcomes: Sequence[Outcome[R]]) -> list[R | Unscored | LLMError]:
    # ask_all gives every request a result; None would be a bug, read as no reply.
    return [o.result if o.result is not None else Unscored(reason="no reply", raw="")
            for o in outcomes]  # fmt: skip


class SynthAsk:
    """The synth questions of one run, over ``session``'s judge."""

    def __init__(self, session: JudgeSession) -> None:
        self.session = session
        self.renderer = PromptRenderer()
        for rubric in _RUBRICS.values():
            self.renderer.load(rubric)

    def question_request(self, kind: Kind, seeds: Sequence[Chunk], seed: int) -> CompletionRequest:
        """The request for one question of ``kind`` from ``seeds`` (``SEEDS[kind]`` chunks).
        ``seed`` is shown in the prompt as a variant number: another seed asks for another
        question about the same chunks (and is another cache entry)."""
        if kind not in SEEDS:
            raise ValueError(f"unknown kind of question {kind!r}: one of {', '.join(KINDS)}")
        if len(seeds) != SEEDS[kind]:
            raise ValueError(f"a {kind} question takes {SEEDS[kind]} seed chunks, not {len(seeds)}")
        variables = {"kind": kind, "passages": [c.text for c in seeds], "variant": seed}
        messages = self.renderer.render(QUESTION_RUBRIC, variables)
        return self.session.judge.request(messages, QUESTION_SCHEMA)

    def grade_request(self, question: str, chunk: Chunk) -> CompletionRequest:
        """The request for ``chunk``'s 0-3 grade for ``question`` (UMBRELA)."""
        messages = self.renderer.render(GRADE_RUBRIC, {"query": question, "passage": chunk.text})
        return self.session.judge.request(messages, GRADE_SCHEMA)

    def closed_book_request(self, question: str) -> CompletionRequest:
        """The request for an answer to ``question`` without any documents."""
        messages = self.renderer.render(CLOSED_BOOK_RUBRIC, {"query": question})
        return self.session.judge.request(messages, CLOSED_BOOK_SCHEMA)

    async def ask_questions(
        self, engine: JudgeEngine, jobs: Sequence[tuple[Kind, Sequence[Chunk], int]]
    ) -> list[Generated | Unscored | LLMError]:
        """One question per job (kind, seed chunks, seed), in order, over ``engine``."""
        requests = [self.question_request(kind, seeds, seed) for kind, seeds, seed in jobs]
        readers = [read_generated(kind) for kind, _, _ in jobs]
        reask = self.session.judge.reask
        outcomes = await ask_all(engine, requests, readers, shape=_QUESTION_SHAPE, reask=reask,
                                 label="synth questions")  # fmt: skip
        return _results(outcomes)

    async def ask_grades(
        self, engine: JudgeEngine, pairs: Sequence[tuple[str, Chunk]]
    ) -> list[Grade | Unscored | LLMError]:
        """One grade per (question, chunk) pair, in order, over ``engine``."""
        requests = [self.grade_request(question, chunk) for question, chunk in pairs]
        reask = self.session.judge.reask
        outcomes = await ask_all(engine, requests, read_grade, shape=_GRADE_SHAPE, reask=reask,
                                 label="synth grades")  # fmt: skip
        return _results(outcomes)

    async def ask_closed_book(
        self, engine: JudgeEngine, questions: Sequence[str]
    ) -> list[ClosedBook | Unscored | LLMError]:
        """One closed-book answer per question, in order, over ``engine``."""
        requests = [self.closed_book_request(q) for q in questions]
        reask = self.session.judge.reask
        outcomes = await ask_all(engine, requests, read_closed_book, shape=_CLOSED_BOOK_SHAPE,
                                 reask=reask, label="synth closed book")  # fmt: skip
        return _results(outcomes)

    def prompt_hashes(self) -> dict[str, str]:
        """Each template's 12-hex-digit hash (``question``, ``grade``, ``closed_book``): what
        shaped the prompts, for provenance and signatures."""
        return {name: self.renderer.template_hash(r) for name, r in _RUBRICS.items()}
