"""The judge audit: how far a judge's 1-5 scores may reflect something other than quality.

Per judge rubric on its 1-5 scale (:meth:`Report.judge_rubrics` with scale (1, 5); neither its
normalised twin nor a restatement over a subset such as ``faithfulness_answered``):

- **length bias**: the OLS slope of the score on the answer's length in words (whitespace
  tokens), in score points per 100 words, with a seeded percentile-bootstrap interval over the
  samples (a resample whose lengths are all equal has no slope and is left out); None with
  fewer than 3 scored answers or a single length. The means per length quartile: the scored
  answers sorted by length (stably) and cut into 4 groups of near-equal size, so one length
  may sit in two neighbouring groups.
- **score collapse**: the modal verdict (scores rounded half up, as G-Eval's are not whole)
  and its share of the scored samples, ``collapsed`` at a share ≥ the threshold (ties: the
  lowest score).
- **unscored rate**: unscored verdicts / (scored + failed) samples, from the summary; None
  when the judge scored nothing (a judge whose every call failed unscored none, and "0.0%"
  would read as a clean judge), as the ``unscored_rate`` gate has no value there.
- **a judge that failed completely**: :func:`failed_judge_warnings`, a warning the report
  shows as a banner, per judge model whose metrics got no verdict at all.
- **self-preference**: whether the judge's model family (:func:`model_family`) is that of the
  model that generated the answer: a sample's ``metadata["generator"]`` (or ``["model"]``),
  else the run's ``config["generator"]``. True when it is for any scored sample, False when
  every known generator differs, None when no generator (or no judge) is recorded.
- **position consistency** belongs to pairwise runs: :func:`audit_pairwise`.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from rag_judge.analysis.audit_pairwise import audit_pairwise, load_pairwise
from rag_judge.errors import ConfigError
from rag_judge.report.estimates import (
    AUDIT_RESAMPLES,
    COLLAPSE_SHARE,
    LengthStratum,
    RubricAudit,
)
from rag_judge.report.model import Report, ReportWarning, Signature, WarningKind
from rag_judge.report.result import UNIT_PREFIXES
from rag_judge.stats.pages import blocks, mapped, release, spilled
from rag_judge.stats.slopes import grouped, ols_slopes, slope_cis

__all__ = [
    "audit_pairwise",
    "audit_report",
    "audited_rubrics",
    "failed_judge_warnings",
    "judge_families",
    "length_slope",
    "length_strata",
    "load_pairwise",
    "modal_score",
    "model_family",
    "slope_ci",
]

PER_WORDS = 100  # the slope is in score points per this many words
QUARTILES = 4

# Model families whose names do not start with the family (checked on the name after the
# provider prefix is dropped, in order); any other name's family is its leading letters.
FAMILIES: tuple[tuple[str, str], ...] = (
    (r"(meta-)?(code)?llama", "llama"),
    (r"(chat)?gpt|o\d", "gpt"),  # OpenAI: gpt-4o, chatgpt-4o-latest, o1, o3-mini
    (r"mi[sx]tral|ministral|codestral", "mistral"),
    (r"qwen|qwq", "qwen"),
)


def model_family(model: str) -> str | None:
    """The family of a model name, for self-preference: lower-cased, the provider prefix or a
    path's directories dropped (``openai/``, ``meta-llama/``, ``/models/``), then a known
    family of :data:`FAMILIES` (``Meta-Llama-3.1-8B`` → llama, ``o3-mini`` → gpt), else the
    name's leading letters (``gpt-4o-mini`` → gpt, ``claude-3-5-sonnet`` → claude,
    ``smollm2-135m`` → smollm). None for a name without leading letters."""
    name = model.strip().lower().rstrip("/").rsplit("/", 1)[-1]
    for pattern, family in FAMILIES:
        if re.match(pattern, name):
            return family
    lead = re.match(r"[a-z]+", name)
    return lead.group(0) if lead else None


def judge_families(signature: Signature | None) -> dict[str, str]:
    """Judge model ("provider/model") -> its family, from a signature's ``judge`` option: one
    judge, or each juror of ``jury[provider/model,...]``."""
    out = {}
    for model in signature.judges() if signature is not None else []:
        family = model_family(model)
        if family is not None:
            out[model] = family
    return out


# ---- statistics (pure numpy) ------------------------------------------------------------------


def length_slope(lengths: NDArray[np.float64], scores: NDArray[np.float64]) -> float | None:
    """Score points per 100 words: the OLS slope of ``scores`` on ``lengths``; None for fewer
    than 3 answers or a single length."""
    if len(lengths) < 3:
        return None
    x, y = lengths - lengths.mean(), scores - scores.mean()
    slope = float(ols_slopes(x[None, :], y[None, :])[0])
    return None if math.isnan(slope) else slope * PER_WORDS


def slope_ci(
    lengths: NDArray[np.float64],
    scores: NDArray[np.float64],
    *,
    resamples: int = 1000,
    confidence: float = 0.95,
    seed: int = 0,
) -> tuple[float, float] | None:
    """Percentile bootstrap interval of :func:`length_slope`, resampling answers; indices are
    drawn as ``default_rng(seed).integers(0, n, (resamples, n))`` (in chunks for a large n),
    and a resample with a single length is dropped (:func:`~rag_judge.stats.slopes.slope_cis`,
    which finds several rubrics' intervals on the same answers from one set of draws)."""
    return _slope_cis(lengths, [scores], resamples, confidence, seed)[0]


def _slope_cis(
    lengths: NDArray[np.float64],
    scores: list[NDArray[np.float64]],
    resamples: int,
    confidence: float,
    seed: int,
) -> list[tuple[float, float] | None]:
    # A rubric without a slope (one length, or a NaN score) has no interval; the others do.
    has = [length_slope(lengths, y) is not None for y in scores]
    sloped = [y for y, h in zip(scores, has, strict=True) if h]
    found = iter(
        slope_cis(lengths, sloped, resamples=resamples, confidence=confidence, seed=seed,
                  per=PER_WORDS) if sloped else []
    )  # fmt: skip
    return [next(found) if h else None for h in has]


def length_strata(
    lengths: NDArray[np.float64], scores: NDArray[np.float64], groups: int = QUARTILES
) -> list[LengthStratum]:
    """The mean score of each of ``groups`` near-equal groups of answers sorted by length
    (empty groups, with fewer answers than groups, left out)."""
    order = np.argsort(lengths, kind="stable")
    return [
        LengthStratum(
            low=int(lengths[part].min()),
            high=int(lengths[part].max()),
            n=len(part),
            mean=float(scores[part].mean()),
        )
        for part in np.array_split(order, groups)
        if len(part)
    ]


def modal_score(scores: NDArray[np.float64]) -> tuple[float, float] | tuple[None, None]:
    """The most frequent verdict, scores rounded half up (3.5 → 4; ties: the lowest), and its
    share of ``scores``."""
    if len(scores) == 0:
        return None, None
    found: Counter[float] = Counter()
    nan = 0  # NaN is one value, ranked last, as numpy's unique has it
    for _, block in blocks(scores):  # a block at a time: a million scores are not copied
        rounded = np.floor(block + 0.5)
        missing = np.isnan(rounded)
        nan += int(missing.sum())
        values, counts = np.unique(rounded[~missing], return_counts=True)
        found.update(dict(zip(values.tolist(), counts.tolist(), strict=True)))
    ranked = [(v, found[v]) for v in sorted(found)] + ([(math.nan, nan)] if nan else [])
    top, count = max(ranked, key=lambda vc: vc[1])  # the first of the most: the lowest
    return float(top), float(count) / len(scores)


# ---- the report's rubrics ---------------------------------------------------------------------


def audited_rubrics(report: Report) -> list[str]:
    """The judge rubrics on a 1-5 scale, less a rubric restated over a subset of the samples
    (:meth:`Report.graded_rubrics`)."""
    return report.graded_rubrics()


def audit_report(
    report: Report,
    *,
    collapse_threshold: float = COLLAPSE_SHARE,
    resamples: int = AUDIT_RESAMPLES,
    seed: int = 0,
) -> dict[str, RubricAudit]:
    """The audit of every judge rubric of ``report`` on its 1-5 scale (see the module)."""
    if not 0 < collapse_threshold <= 1:
        raise ConfigError(
            f"collapse_threshold {collapse_threshold!r} is not a share; expected a number in "
            "(0, 1] (0.8: collapsed when 80% of verdicts are one score)"
        )
    rubrics = audited_rubrics(report)
    if not rubrics:
        return {}
    lengths, generators = _per_sample(report)
    index = report.index()
    found = {}
    for metric in rubrics:
        if metric.startswith(UNIT_PREFIXES):  # scored per turn: each turn's own answer
            scores, length, family = _per_unit(report, metric, generators.of_samples())
            seen = Counter(family)
        else:
            # A run's columns map files. The scores and lengths stay in them, or go to one when
            # some samples are left out, and each step below lets their pages go when done.
            column = index.column(metric)
            scored = index.present(metric) & ~np.isnan(column)
            every = bool(scored.all())  # then neither is copied
            scores = _kept(column) if every else spilled(column[scored])
            length = lengths if every else spilled(lengths[scored])
            seen = generators.among(scored)
            release(column, lengths)
        found[metric] = (scores, length, seen)
    # The answered samples' lengths and scores, found once: the intervals and the rest read them.
    answered = {m: _answered(length, scores) for m, (scores, length, _) in found.items()}
    intervals = _intervals(answered, resamples, report.confidence, seed)
    out = {}
    for metric, (scores, length, seen) in found.items():
        x, y = answered[metric]
        mode, share = modal_score(scores)
        summary = report.summary[metric]
        judged = summary.n + summary.errors
        prefers, note = _self_preference(judge_families(report.signatures.get(metric)), seen)
        out[metric] = RubricAudit(
            metric=metric,
            n=len(scores),
            length_slope=length_slope(x, y),
            length_slope_ci=intervals[metric],
            length_strata=length_strata(x, y),
            modal_score=mode,
            modal_share=share,
            collapsed=share is not None and share >= collapse_threshold,
            unscored_rate=summary.unscored / judged if judged and summary.n else None,
            self_preference=prefers,
            self_preference_note=note,
        )
        release(x, y, scores, length)
    return out


def _intervals(
    pairs: dict[str, tuple[NDArray[np.float64], NDArray[np.float64]]],
    resamples: int,
    confidence: float,
    seed: int,
) -> dict[str, tuple[float, float] | None]:
    """Each rubric's :func:`slope_ci` over its answered samples (``pairs``: lengths, scores);
    rubrics judged on the same answers share one set of draws (``slopes.grouped``)."""
    out: dict[str, tuple[float, float] | None] = {}
    for x, metrics in grouped({m: x for m, (x, _) in pairs.items()}):
        ys = [pairs[m][1] for m in metrics]
        release(x, *ys)  # read by the grouping; the slopes read them again
        out.update(zip(metrics, _slope_cis(x, ys, resamples, confidence, seed), strict=True))
    return out


def failed_judge_warnings(report: Report) -> list[ReportWarning]:
    """One warning per judge (the models of a signature's ``judge`` option) whose metrics got
    no verdict on any sample they were asked about: errors, no value. A rubric restated over a
    subset (``restates``) repeats its rubric's failure and is left out."""
    failed: dict[tuple[str, ...], list[str]] = {}
    for metric in report.judge_rubrics():
        s, sig = report.summary[metric], report.signatures.get(metric)
        if s.n == 0 and s.errors > 0 and s.restates is None:
            failed.setdefault(tuple(sig.judges()) if sig is not None else (), []).append(metric)
    if not failed:
        return []
    first = {}  # each failed metric's first failure: what went wrong, in the run's words
    for _, metric, failure in report.index().failures:
        if failure.counts and metric not in first:
            first[metric] = failure.text()
    out = []
    for judges, metrics in failed.items():
        s = report.summary[metrics[0]]
        who = f"The judge {', '.join(judges)}" if judges else "The judge"
        unread = f", {s.unscored} of them replies with no verdict to read" if s.unscored else ""
        them = f"{metrics[0]} has" if len(metrics) == 1 else f"{', '.join(metrics)} have"
        why = first.get(metrics[0], "")
        message = (
            f"{who} produced no verdict: all {s.errors} samples it was asked about failed"
            f"{unread}, so {them} no mean, no audit and nothing to review."
            + (f" First failure: {why[:300]}" if why else "")
        )
        out.append(
            ReportWarning(
                kind=WarningKind.JUDGE_FAILED,
                metric=", ".join(metrics),
                value=s.errors,
                threshold=0,
                message=message,
            )
        )
    return out


@dataclass(frozen=True)
class _Families:
    """Each sample's generator family as a code into ``names`` (-1: the run's own, or none):
    4 bytes a sample, not a list of a million strings."""

    codes: NDArray[np.int32]
    names: list[str | None]
    default: str | None

    def among(self, scored: NDArray[np.bool_]) -> Counter[str | None]:
        """How many of the ``scored`` samples each family generated."""
        counts = np.bincount(self.codes[scored] + 1, minlength=len(self.names) + 1).tolist()
        release(self.codes)
        seen: Counter[str | None] = Counter()
        for family, count in zip([self.default, *self.names], counts, strict=True):
            if count:
                seen[family] += count
        return seen

    def of_samples(self) -> list[str | None]:
        return [self.names[c] if c >= 0 else self.default for c in self.codes.tolist()]


def _per_sample(report: Report) -> tuple[NDArray[np.float64], _Families]:
    """Each sample's answer length in words (NaN: no answer) and its generator's family, in the
    order of the report's index (which kept both as the samples passed)."""
    run_level = report.config.get("generator")
    default = model_family(run_level) if isinstance(run_level, str) and run_level else None
    index = report.index()
    codes, named = index.generator_codes()
    families = _Families(codes, [model_family(n) for n in named], default)
    return _kept(index.answer_words.numpy()), families


def _kept(values: NDArray[np.float64]) -> NDArray[np.float64]:
    """An index's column as the audit keeps it: a map of its file as it is (read a block at a
    time, its pages let go after each step), else a copy (the index's own array grows)."""
    return values if mapped(values) else np.array(values, dtype=np.float64)


def _answered(
    length: NDArray[np.float64], scores: NDArray[np.float64]
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """The lengths and scores of the samples with an answer (the arrays themselves when every
    sample has one: a million are not copied; else copies, in a file past a megabyte)."""
    answered = ~np.isnan(length)
    if answered.all():
        return length, scores
    return spilled(length[answered]), spilled(scores[answered])


def _per_unit(
    report: Report, metric: str, generators: list[str | None]
) -> tuple[NDArray[np.float64], NDArray[np.float64], list[str | None]]:
    """A per-turn rubric's scored verdicts, each with its turn's answer length in words (NaN:
    no answer) and its conversation's generator family (``generators``, per sample)."""
    scores, length, family = [], [], []
    for r, generator in zip(report.samples, generators, strict=True):
        units = [u for u in r.units if u.scores.get(metric) is not None]
        turns = r.sample.conversation_turns() if units and r.sample is not None else ()
        for unit in units:
            value = unit.scores[metric]
            if value is None or math.isnan(value):
                continue
            answer = turns[unit.turn].answer if unit.turn < len(turns) else None
            scores.append(value)
            length.append(math.nan if answer is None else float(len(answer.split())))
            family.append(generator)
    return np.array(scores, dtype=np.float64), np.array(length, dtype=np.float64), family


def _self_preference(
    judges: Mapping[str, str], generators: Counter[str | None]
) -> tuple[bool | None, str]:
    """Whether a scored sample's generator (``generators``: how many samples each family
    generated) is of a judge's family, and a line saying so."""
    if not judges:
        return None, "the judge model is not recorded in the rubric's signature"
    seen = Counter(generators)
    unknown = seen.pop(None, 0)
    judge_text = ", ".join(f"{f} ({m})" for m, f in judges.items())
    if not seen:
        return None, (
            f"judge family {judge_text}; no generator recorded (a sample's metadata "
            "'generator' or 'model', or the config's 'generator')"
        )
    total = sum(seen.values()) + unknown
    same = sum(c for f, c in seen.items() if f in set(judges.values()))
    gens = ", ".join(f"{f} ({c})" for f, c in sorted(seen.items()))
    tail = f"; {unknown} with no generator recorded" if unknown else ""
    if same:
        return True, (
            f"judge family {judge_text} generated {same}/{total} judged answers "
            f"(generator families: {gens}{tail})"
        )
    return False, f"judge family {judge_text}; generator families: {gens}{tail}"
