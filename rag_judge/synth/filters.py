"""The filters that reject weak synthetic items, as pure functions of the texts and grades.

Each returns a :class:`FilterVerdict` (its name, whether the item passed, and why), recorded
per item as provenance; ``near_duplicates`` works over the whole set. The rules and their
thresholds are in docs/synth.md ("Filters").
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence

from pydantic import BaseModel, ConfigDict
from rapidfuzz import fuzz, utils

from rag_judge.synth.asks import ClosedBook

__all__ = [
    "STOPWORDS",
    "FilterVerdict",
    "closed_book",
    "content_words",
    "leaks_answer",
    "near_duplicates",
    "seed_needed",
    "token_f1",
    "unanswerable_holds",
]

_WORD = re.compile(r"\w+")
# Words that say nothing about what a question asks: a run of them is no quotation.
_STOPWORD_TEXT = (
    "a an and are as at be been but by can do does did for from had has have he her his how i "
    "if in into is it its me my no not of on or our she so than that the their them then there "
    "these they this to was we were what when where which who whom why will with you your"
)
STOPWORDS = frozenset(_STOPWORD_TEXT.split())
_ARTICLES = frozenset({"a", "an", "the"})


class FilterVerdict(BaseModel):
    """One filter's verdict on one item: ``passed`` False rejects it; ``detail`` says why."""

    model_config = ConfigDict(frozen=True)

    name: str
    passed: bool
    detail: str


def content_words(text: str) -> list[str]:
    """The words of ``text`` (runs of letters, digits and ``_``), case-folded, in order,
    without ``STOPWORDS``."""
    return [w for w in _WORD.findall(text.casefold()) if w not in STOPWORDS]


def near_duplicates(questions: Sequence[str], threshold: float = 90.0) -> list[int | None]:
    """For each question, the index of the first earlier *kept* question it nearly repeats
    (rapidfuzz ``token_sort_ratio`` at least ``threshold``, 0-100, over the texts case-folded
    and with punctuation made spaces), else None: the question is kept. A question that
    repeats a rejected one but no kept one is kept, so of a run of near-repeats the first
    stays."""
    kept: list[tuple[int, str]] = []
    out: list[int | None] = []
    for i, question in enumerate(questions):
        text = utils.default_process(question.casefold())
        twin = next(
            (j for j, other in kept
             if fuzz.token_sort_ratio(text, other, score_cutoff=threshold) >= threshold),
            None,
        )  # fmt: skip
        out.append(twin)
        if twin is None:
            kept.append((i, text))
    return out


def leaks_answer(question: str, answer: str, min_words: int = 4) -> FilterVerdict:
    """Rejects a question that quotes its answer: some ``min_words`` consecutive content words
    of the answer (``content_words``: stopwords dropped, so "the bridge opened in 1932" is the
    run bridge, opened, 1932) appear as consecutive content words of the question. An answer
    of fewer content words cannot trip it: a comparison names its options, and that is no
    leak."""
    said = content_words(answer)
    asked = content_words(question)
    runs = {tuple(asked[i : i + min_words]) for i in range(len(asked) - min_words + 1)}
    quoted = next(
        (said[i : i + min_words] for i in range(len(said) - min_words + 1)
         if tuple(said[i : i + min_words]) in runs),
        None,
    )  # fmt: skip
    if quoted is None:
        detail = f"no {min_words} consecutive content words of the answer in the question"
        return FilterVerdict(name="leak", passed=True, detail=detail)
    detail = f"the question quotes the answer: {' '.join(quoted)!r}"
    return FilterVerdict(name="leak", passed=False, detail=detail)


def _tokens(text: str) -> list[str]:
    """SQuAD's answer normalisation: case-folded words, punctuation and articles dropped."""
    return [w for w in _WORD.findall(text.casefold()) if w not in _ARTICLES]


def token_f1(prediction: str, reference: str) -> float:
    """SQuAD's token F1 of two answers (``_tokens``, counted with multiplicity); 0 when either
    has no tokens."""
    guess, truth = _tokens(prediction), _tokens(reference)
    common = sum((Counter(guess) & Counter(truth)).values())
    if not common:
        return 0.0
    precision, recall = common / len(guess), common / len(truth)
    return 2 * precision * recall / (precision + recall)


def closed_book(
    question: str, reference: str, closed: ClosedBook, threshold: float = 0.6
) -> FilterVerdict:
    """Rejects a question answerable without the corpus: the answer the judge gave with no
    documents agrees with the reference, token F1 (``token_f1``) at least ``threshold``. A
    judge that declines (``closed.answer`` None) passes it."""
    if closed.answer is None:
        return FilterVerdict(name="closed_book", passed=True,
                             detail="the judge cannot answer it without the documents")  # fmt: skip
    f1 = token_f1(closed.answer, reference)
    agrees = f1 >= threshold
    relation = ">=" if agrees else "<"
    detail = f"closed-book answer's token F1 with the reference {f1:.2f} {relation} {threshold:g}"
    if agrees:
        detail = f"answerable without the corpus: {detail} ({question!r})"
    return FilterVerdict(name="closed_book", passed=not agrees, detail=detail)


def seed_needed(seed_grades: Sequence[int], min_grade: int = 2) -> FilterVerdict:
    """Rejects a question that does not need its seed chunks: any seed chunk graded below
    ``min_grade`` (or no seed grade at all)."""
    if not seed_grades:
        return FilterVerdict(name="seed_needed", passed=False, detail="no seed chunk graded")
    low = [i + 1 for i, g in enumerate(seed_grades) if g < min_grade]
    if low:
        grades = ", ".join(str(seed_grades[i - 1]) for i in low)
        detail = f"seed chunk {', '.join(map(str, low))} graded {grades} < {min_grade}"
        return FilterVerdict(name="seed_needed", passed=False, detail=detail)
    detail = f"every seed chunk graded >= {min_grade}"
    return FilterVerdict(name="seed_needed", passed=True, detail=detail)


def unanswerable_holds(pool_grades: Sequence[int], max_grade: int = 1) -> FilterVerdict:
    """Rejects an unanswerable question that the pool answers: any pool chunk graded above
    ``max_grade`` (with the default, 2 or 3: some answer)."""
    over = [g for g in pool_grades if g > max_grade]
    if over:
        detail = f"{len(over)} of {len(pool_grades)} pool chunks graded > {max_grade}: answerable"
        return FilterVerdict(name="unanswerable", passed=False, detail=detail)
    detail = f"no pool chunk of {len(pool_grades)} graded > {max_grade}"
    return FilterVerdict(name="unanswerable", passed=True, detail=detail)
