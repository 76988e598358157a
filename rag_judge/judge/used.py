"""What the judge's server actually did, counted over every chunk of a run: whether logprobs
came back (else a rubric's scores are the stated integers, and its signature says so), whether
fewer than the ``n`` choices asked for came back (the signature's ``n`` then says how many the
scores rest on: ``n:3→1``), and whether replies to requests that carried a ``response_format``
ignored it; warned about once per run."""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from rag_judge.judge.judging import Verdict, leaves
from rag_judge.judge.rubrics import Rubric
from rag_judge.judge.verdicts import Scoring

__all__ = ["Used"]

log = logging.getLogger("rag_judge.evaluators.judge")  # the name users filter on


@dataclass
class _Tally:
    """One rubric's verdicts (leaves: per-context ones one by one) so far."""

    leaves: int = 0
    scored: int = 0
    logprobs_missing: int = 0  # scored without usable logprobs
    short: int = 0  # replies with fewer choices than n
    # Replies that carried a response_format yet are not what its schema asks for (and were
    # not cut off at max_tokens, which would explain it): the server ignored the format.
    format_ignored: int = 0
    with_format: int = 0
    received: Counter[int] = field(default_factory=Counter)  # scored verdicts by choices


def _honoured_n(asked: int, received: Counter[int]) -> str:
    """The signature's ``n``: ``asked`` when every scored verdict rests on that many choices
    (or none was scored), else ``asked→`` the counts it rests on: ``3→1`` (a server that
    ignores ``n``), ``3→1,3`` (some replies short)."""
    counts = sorted(received)
    if not counts or counts == [asked]:
        return str(asked)
    return f"{asked}→{','.join(map(str, counts))}"


class Used:
    """Per rubric, counts of what the server did with the verdicts of every chunk so far."""

    def __init__(self, rubrics: Sequence[Rubric], scoring: Scoring, n: int) -> None:
        self.rubrics = list(rubrics)
        self.scoring = scoring
        self.n = n
        self.counts = {r.name: _Tally() for r in self.rubrics}

    def add(self, found: Iterable[Verdict]) -> None:
        """A chunk's verdicts."""
        by_rubric: dict[str, list[Verdict]] = {}
        for verdict in found:
            by_rubric.setdefault(verdict.rubric.name, []).append(verdict)
        for name, tally in self.counts.items():
            judged = leaves(by_rubric.get(name, ()))
            scored = [j for j in judged if j.score is not None]
            tally.leaves += len(judged)
            tally.scored += len(scored)
            tally.logprobs_missing += sum(bool(j.logprobs_missing) for j in scored)
            tally.short += sum(j.choices_received is not None for j in judged)
            tally.received.update(j.choices_received or self.n for j in scored)
            formatted = [j for j in judged if j.structured_output]
            tally.with_format += len(formatted)
            tally.format_ignored += sum(
                j.schema_valid is False and j.finish_reason != "length" for j in formatted
            )

    def updates(self) -> dict[str, dict[str, str]]:
        """Per rubric, the signature options that say how its scores were actually computed
        (``scoring``, and ``n`` as the server honoured it); warns once about features the
        server ignored (logprobs, ``n``, ``response_format``)."""
        out: dict[str, dict[str, str]] = {}
        fell_back: list[str] = []
        short: list[str] = []
        unformatted: list[str] = []
        for name, t in self.counts.items():
            update: dict[str, str] = {}
            if t.short:
                short.append(f"{name} {t.short} of {t.leaves}")
                update["n"] = _honoured_n(self.n, t.received)
            if t.format_ignored:
                unformatted.append(f"{name} {t.format_ignored} of {t.with_format}")
            if self.scoring == "logprobs" and t.logprobs_missing:
                used = "integer" if t.logprobs_missing == t.scored else "mixed"
                fell_back.append(f"{name} {t.logprobs_missing} of {t.scored} (scoring:{used})")
                update["scoring"] = used
            if update:
                out[name] = update
        if fell_back:
            log.warning(
                "logprobs were asked for, but the judge's server sent none usable with these "
                "verdicts, scored instead by the judge's stated integer (judgments marked "
                "logprobs_missing): %s",
                ", ".join(fell_back),
            )
        if short:
            log.warning(
                "n=%d choices were asked for, but the judge's server sent fewer with these "
                "replies (judgments record choices_received; the signature's n says what the "
                "scores rest on): %s",
                self.n,
                ", ".join(short),
            )
        if unformatted:
            log.warning(
                "the verdict's JSON schema was sent as response_format, but these replies do "
                "not follow it, so the judge's server seems to ignore response_format; the "
                "tolerant parser read them (judgments marked structured_output, schema_valid "
                "false): %s",
                ", ".join(unformatted),
            )
        return out
