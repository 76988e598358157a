"""What the judge's server actually did, counted over every chunk of a run: whether logprobs
came back (else a rubric's scores are the stated integers, and its signature says so) and
whether fewer than the ``n`` choices asked for came back; warned about once per run."""

from __future__ import annotations

import logging
from collections.abc import Sequence

from rag_judge.evaluators.base import EvaluatorResult
from rag_judge.judge.rubrics import Rubric
from rag_judge.judge.verdicts import Scoring
from rag_judge.report.model import Judgment, Signature

__all__ = ["NORM", "Used"]

log = logging.getLogger("rag_judge.evaluators.judge")
NORM = "_norm"  # a rubric's [0, 1] twin: faithfulness -> faithfulness_norm


class Used:
    """Per rubric, counts of what the server did with the verdicts of every chunk so far."""

    def __init__(self, rubrics: Sequence[Rubric], scoring: Scoring, n: int) -> None:
        self.rubrics = list(rubrics)
        self.scoring = scoring
        self.n = n
        # rubric -> [verdicts (leaves), scored, scored without usable logprobs, short of n]
        self.counts = {r.name: [0, 0, 0, 0] for r in self.rubrics}

    def add(self, result: EvaluatorResult) -> None:
        for name, counts in self.counts.items():
            leaves = _leaves(result, name)
            scored = [j for j in leaves if j.score is not None]
            counts[0] += len(leaves)
            counts[1] += len(scored)
            counts[2] += sum(bool(j.logprobs_missing) for j in scored)
            counts[3] += sum(j.choices_received is not None for j in leaves)

    def signatures(self, signatures: dict[str, Signature]) -> dict[str, Signature]:
        """``signatures`` with each rubric's saying how its scores were computed; warns once
        about features the server ignored (logprobs, ``n``)."""
        out = dict(signatures)
        fell_back: list[str] = []
        short: list[str] = []
        for name, (leaves, scored, missing, received) in self.counts.items():
            if received:
                short.append(f"{name} {received} of {leaves}")
            if self.scoring != "logprobs" or not missing:
                continue
            used = "integer" if missing == scored else "mixed"
            fell_back.append(f"{name} {missing} of {scored} (scoring:{used})")
            for metric in (name, name + NORM):
                sig = out[metric]
                out[metric] = sig.model_copy(update={"options": {**sig.options, "scoring": used}})
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
                "replies (judgments record choices_received): %s",
                self.n,
                ", ".join(short),
            )
        return out


def _leaves(result: EvaluatorResult, rubric: str) -> list[Judgment]:
    """Every judgment of ``rubric`` in ``result``, per-context ones one by one."""
    out: list[Judgment] = []
    for judged in result.judgments or []:
        entry = judged.get(rubric)
        if entry is not None:
            out.extend(entry.contexts if entry.contexts is not None else [entry])
    return out
