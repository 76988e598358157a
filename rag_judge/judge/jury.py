"""A jury of judges: how its settings are checked, how its jurors' verdicts on one sample and
rubric become one, and how its signature reads. Pure functions; running a jury (and a single
judge, a panel of one) is ``rag_judge.judge.panel``.

Several judges of different families average out one model's quirks (its self-preference,
its leniency) and their disagreement is a per-sample uncertainty signal: the jury's judgment
keeps every juror's verdict (``jury``), their scores and spread, and the jury's score is one
``aggregate`` of the scored verdicts, so a judge that failed is dropped (down to a
``quorum``) or fails the sample, as ``on_judge_failure`` says.
"""

from __future__ import annotations

import math
import statistics
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal, get_args

from rag_judge.judge.judging import Verdict
from rag_judge.judge.settings import Judge, check_config
from rag_judge.llm import ClientConfig
from rag_judge.report.model import (
    Failure,
    FailureKind,
    JudgeName,
    Judgment,
    Juror,
    JuryJudgment,
    PerContextJudgment,
    RubricJudgment,
    Signature,
)

__all__ = [
    "AGGREGATIONS",
    "Aggregation",
    "FailurePolicy",
    "Jury",
    "aggregate",
    "check_jurors",
    "default_quorum",
    "juror_names",
    "jury_problem",
    "jury_signatures",
    "jury_verdict",
]

Aggregation = Literal["mean", "median", "majority", "trimmed"]
AGGREGATIONS: tuple[str, ...] = get_args(Aggregation)
FailurePolicy = Literal["drop", "fail"]


def aggregate(scores: Sequence[float], how: Aggregation) -> float:
    """The jury's score from its scored verdicts (at least one).

    ``mean``; ``median`` (an even count: the mean of the middle two); ``majority``: the most
    frequent verdict once each is rounded half up (G-Eval scores are not whole), a tie going
    to the lowest tied value, so a split jury errs on the strict side and the result never
    depends on the jurors' order; ``trimmed``: the mean without one lowest and one highest
    verdict when 3 or more scored, else the plain mean."""
    if not scores:
        raise ValueError("aggregate needs at least one scored verdict")
    ordered = sorted(scores)
    k = len(ordered)
    if how == "mean":
        return math.fsum(ordered) / k
    if how == "median":
        mid = k // 2
        return ordered[mid] if k % 2 else (ordered[mid - 1] + ordered[mid]) / 2
    if how == "majority":
        counts = Counter(math.floor(s + 0.5) for s in ordered)
        top = max(counts.values())
        return float(min(v for v, c in counts.items() if c == top))
    if how == "trimmed":
        kept = ordered[1:-1] if k >= 3 else ordered
        return math.fsum(kept) / len(kept)
    raise ValueError(f"aggregation {how!r} is not one of {', '.join(AGGREGATIONS)}")


def default_quorum(judges: int) -> int:
    """A majority of the judges: the fewest that must score a verdict by default."""
    return judges // 2 + 1


def jury_problem(
    judges: Sequence[ClientConfig],
    client: ClientConfig,
    aggregation: str,
    quorum: int | None,
    on_judge_failure: str,
) -> str | None:
    """What is wrong with a judge evaluator's jury settings (None: nothing). A jury setting
    without a jury would be silently ignored, so it is an error too."""
    if not judges:
        stray = [
            f"{name}={value!r}"
            for name, value, default in (
                ("aggregation", aggregation, "mean"),
                ("quorum", quorum, None),
                ("on_judge_failure", on_judge_failure, "drop"),
            )
            if value != default
        ]
        if stray:
            return (
                f"{', '.join(stray)} without judges: jury settings combine a jury's verdicts; "
                "set judges (a list of 2 or more clients) or leave them out"
            )
        return None
    if len(judges) < 2:
        return (
            f"judges: a jury needs at least 2 judges, got {len(judges)} "
            "(for a single judge, set client instead)"
        )
    if client != ClientConfig():
        return (
            "judges and client are both set: a jury's judges replace client, so leave client "
            "out when judges is given (or give that model as one of the judges)"
        )
    for i, config in enumerate(judges):
        first = judges.index(config)
        if first < i:
            return (
                f"judges[{i}] repeats judges[{first}]: the same judge twice gets the same "
                "(cached) verdicts; a jury needs different judges"
            )
    if quorum is not None and not 1 <= quorum <= len(judges):
        return f"quorum={quorum} must be between 1 and the number of judges, {len(judges)}"
    return None


def check_jurors(judges: Sequence[ClientConfig]) -> None:
    """Each juror's client config, as a single judge's is checked (an API key in the
    environment; nothing is called); a ConfigError's ``loc`` names the juror's option:
    ``judges[1].api_key_env``."""
    for k, config in enumerate(judges):
        check_config(config, ("judges", k))


def juror_names(judges: Sequence[JudgeName]) -> list[JudgeName]:
    """Each juror's name; a name seen before gets ``#2``, ``#3``... on its model, so that
    every juror has its own column in the agreement."""
    names: list[JudgeName] = []
    for name in judges:
        repeats = sum(n.text == name.text or n.text.startswith(name.text + "#") for n in names)
        if repeats:
            name = name.model_copy(update={"model": f"{name.model}#{repeats + 1}"})
        names.append(name)
    return names


def jury_verdict(
    verdicts: Sequence[Juror],
    failures: Sequence[Failure | None],
    how: Aggregation,
    quorum: int,
    policy: FailurePolicy,
) -> tuple[JuryJudgment, Failure | None]:
    """One sample's jury judgment on one rubric from its jurors' judgments (each naming its
    ``judge``) and failures (None where the juror scored), and the sample's failure, if any:
    ``unscored``, naming each failed judge and why, when fewer than ``quorum`` scored or, with
    ``policy`` "fail", when any failed."""
    m = len(verdicts)
    scored = [v.score for v, f in zip(verdicts, failures) if f is None and v.score is not None]
    failed = [
        f"{v.judge}: {(f or Failure(message='no score')).text()}"
        for v, f in zip(verdicts, failures)
        if f is not None or v.score is None
    ]
    k = len(scored)
    why = "; ".join(failed)
    score: float | None = None
    if policy == "fail" and failed:
        reason = f"{len(failed)} of {m} judges failed (on_judge_failure: fail): {why}"
    elif k < quorum:
        reason = f"{k} of {m} judges scored, fewer than the quorum of {quorum}: {why}"
    else:
        score = aggregate(scored, how)
        reason = f"{how} of {k} of {m} judges" + (f"; dropped {why}" if failed else "")
    entry = JuryJudgment(
        score=score,
        reason=reason,
        attempts=sum(v.attempts for v in verdicts),
        cached=all(v.cached for v in verdicts),
        scores=scored or None,
        spread=statistics.pstdev(scored) if scored else None,
        jury=list(verdicts),
    )
    failure = None if score is not None else Failure(kind=FailureKind.UNSCORED, message=reason)
    return entry, failure


def jury_signatures(
    jurors: Sequence[dict[str, Signature]],
    names: Sequence[JudgeName],
    how: Aggregation,
    quorum: int,
    policy: FailurePolicy,
) -> dict[str, Signature]:
    """The jury's signature of each metric from its jurors' (which differ in ``judge`` and
    perhaps ``scoring`` and ``n``): ``judge:jury[a/x,b/y]``, ``scoring`` (and ``n``) the
    jurors' values joined by ``+`` in their order when they differ, then ``agg`` (a
    per-context rubric: ``mean-over-contexts,<aggregation>``: contexts first, then judges),
    ``quorum`` and ``on_fail``."""
    out: dict[str, Signature] = {}
    for metric, first in jurors[0].items():
        modes = [signatures[metric].options.get("scoring", "") for signatures in jurors]
        agg = first.options.get("agg")
        options = {k: v for k, v in first.options.items() if k not in ("agg", "scale", "version")}
        options["judge"] = f"jury[{','.join(n.text for n in names)}]"
        options["scoring"] = modes[0] if len(set(modes)) == 1 else "+".join(modes)
        if "n" in options:  # as each juror's server honoured it (n:3+3→1)
            ns = [signatures[metric].options.get("n", "") for signatures in jurors]
            options["n"] = ns[0] if len(set(ns)) == 1 else "+".join(ns)
        options["agg"] = f"{agg},{how}" if agg else how
        options["quorum"] = str(quorum)
        options["on_fail"] = policy
        tail: dict[str, str] = {
            k: first.options[k] for k in ("scale", "version") if k in first.options
        }
        merged: dict[str, str] = {**options, **tail}
        out[metric] = first.model_copy(update={"options": merged, "judged_by": tuple(names)})
    return out


@dataclass(frozen=True)
class Jury:
    """How a jury's verdicts become one: ``judges`` (2 or more), the ``aggregation`` of the
    scored verdicts, the ``quorum`` that must score, and what a juror's failure does."""

    judges: tuple[Judge, ...]
    aggregation: Aggregation = "mean"
    quorum: int = 2
    on_failure: FailurePolicy = "drop"

    def reduce(
        self, names: Sequence[JudgeName], per_juror: Sequence[Sequence[Verdict]]
    ) -> list[Verdict]:
        """One verdict per sample and rubric from each juror's (in the same order)."""
        out = []
        for found in zip(*per_juror, strict=True):
            first = found[0]
            verdicts = [_juror(v.judgment, who) for v, who in zip(found, names, strict=True)]
            failures = [v.failure for v in found]
            entry, failure = jury_verdict(
                verdicts, failures, self.aggregation, self.quorum, self.on_failure
            )
            out.append(Verdict(first.index, first.rubric, entry, failure))
        return out

    def signatures(
        self, names: Sequence[JudgeName], jurors: Sequence[dict[str, Signature]]
    ) -> dict[str, Signature]:
        return jury_signatures(jurors, names, self.aggregation, self.quorum, self.on_failure)


def _juror(judgment: Judgment | None, who: JudgeName) -> Juror:
    """A juror's verdict, naming its judge (one without a judgment: a bare unscored one)."""
    if judgment is None:
        return RubricJudgment(score=None, judge=who.text)
    if not isinstance(judgment, RubricJudgment | PerContextJudgment):
        raise TypeError(f"a juror's verdict is one judge's, not a {type(judgment).__name__}")
    return judgment.model_copy(update={"judge": who.text})
