"""A large synthetic Report, built fast (models constructed without validation, texts and
contexts drawn from shared pools), for report.html's size tests and measurements.

Measure render time and page size (``python -m tests.report.synthetic 10000 100000 1000000``);
on a shared 2-core machine (figures move by 10-20% between runs)::

    n=10,000  build 0.3 s  render 0.32 s  report.html 4.02 MB  (616 samples inline)
    n=100,000  build 2.0 s  render 0.72 s  report.html 4.02 MB  (615 samples inline)
    n=1,000,000  build 17.9 s  render 4.28 s  report.html 4.03 MB  (616 samples inline)
"""

from __future__ import annotations

import gc
import math
import random
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

import numpy as np
from pydantic import BaseModel

from rag_judge.data.sample import Context, Sample
from rag_judge.report.model import (
    Failure,
    FailureKind,
    MetricKind,
    MetricSummary,
    Report,
    RubricJudgment,
    SampleResult,
    Signature,
    Usage,
)

__all__ = ["METRICS", "big_report"]

M = TypeVar("M", bound=BaseModel)

_VOCABULARY = (
    "the plan costs per user month team billing annual discount invoice refund policy "
    "account admin seat license storage quota upgrade downgrade trial support contract "
    "renewal region data export api limit rate request token model latency cache server"
)
_WORDS = _VOCABULARY.split()

# metric -> (kind, scale, normalises)
METRICS: dict[str, tuple[MetricKind, tuple[float, float | None], str | None]] = {
    "ndcg@5": (MetricKind.RETRIEVAL, (0.0, 1.0), None),
    "ndcg@10": (MetricKind.RETRIEVAL, (0.0, 1.0), None),
    "recall@10": (MetricKind.RETRIEVAL, (0.0, 1.0), None),
    "mrr": (MetricKind.RETRIEVAL, (0.0, 1.0), None),
    "rougeL_f1": (MetricKind.LEXICAL, (0.0, 1.0), None),
    "bertscore_f1": (MetricKind.EMBEDDING, (0.0, 1.0), None),
    "faithfulness": (MetricKind.JUDGE, (1.0, 5.0), None),
    "faithfulness_norm": (MetricKind.JUDGE, (0.0, 1.0), "faithfulness"),
    "correctness": (MetricKind.JUDGE, (1.0, 5.0), None),
    "correctness_norm": (MetricKind.JUDGE, (0.0, 1.0), "correctness"),
    "latency_s": (MetricKind.LATENCY, (0.0, None), None),
}
_RUBRICS = ("faithfulness", "correctness")


def _text(rng: random.Random, chars: int) -> str:
    words: list[str] = []
    size = 0
    while size < chars:
        word = rng.choice(_WORDS)
        words.append(word)
        size += len(word) + 1
    return " ".join(words).capitalize() + "."


def big_report(
    n: int, *, contexts: int = 10, context_chars: tuple[int, int] = (400, 1200), seed: int = 0
) -> Report:
    """``n`` samples of ``contexts`` ranked contexts each (texts of ``context_chars``), eleven
    metrics (retrieval, lexical, embedding, two judge rubrics with their twins, latency), a
    judgment per rubric per sample (1 in 5 with sampled verdicts and their spread), about 1% of
    samples with an unscored verdict and 0.5% with a failed metric."""
    rng = random.Random(seed)
    gen = np.random.default_rng(seed)
    pool = [
        Context.model_construct(
            id=f"d{i:05d}", text=_text(rng, rng.randint(*context_chars)), score=None, relevance=None
        )
        for i in range(997)
    ]
    rankings = [tuple(pool[(i * 7 + j) % len(pool)] for j in range(contexts)) for i in range(997)]
    tables = [{c.id: float(rng.choice((0, 0, 1, 2, 3))) for c in r} for r in rankings]
    for t in tables:
        t[f"x{rng.randint(0, 999):03d}"] = 2.0  # a relevant document that was not retrieved
    questions = [_text(rng, rng.randint(60, 160)).rstrip(".") + "?" for _ in range(101)]
    answers = [_text(rng, rng.randint(150, 700)) for _ in range(103)]
    refs = [(_text(rng, rng.randint(100, 400)),) for _ in range(89)]
    reasons = [_text(rng, rng.randint(60, 240)) for _ in range(53)]
    raw = '{"score": "somewhere between 3 and 4", "reason": "' + _text(rng, 300) + '"}'

    unit = gen.random((n, 6))
    unit[:, :4][gen.random((n, 4)) < 0.2] = 0.0  # a fifth of the retrieval scores are 0: ties
    verdicts = gen.integers(1, 6, size=(n, 2)).astype(float)
    fate = gen.random(n)  # < 0.01: an unscored verdict; < 0.015: a failed metric
    spread = np.where(gen.random(n) < 0.2, gen.integers(1, 16, size=n), -1)  # tenths; -1: none
    unit_names = ["ndcg@5", "ndcg@10", "recall@10", "mrr", "rougeL_f1", "bertscore_f1"]
    pool_of: dict[tuple[float, int, int], RubricJudgment] = {}

    def verdict(v: float, reason: int, tenths: int) -> RubricJudgment:
        key = (v, reason, tenths)
        if key not in pool_of:  # judgments are shared: each costs microseconds to build
            extra: dict[str, Any] = {}
            if tenths >= 0:
                extra = {"scores": [v] * 5, "spread": tenths / 10}
            pool_of[key] = RubricJudgment.model_construct(
                score=v, reason=reasons[reason], raw="", attempts=1, **extra
            )
        return pool_of[key]

    unscored = RubricJudgment.model_construct(
        score=None, reason="no verdict in the reply", raw=raw, attempts=2
    )
    no_verdict = Failure(kind=FailureKind.UNSCORED, message="no verdict in the reply")
    oom = Failure(message="CUDA out of memory (simulated)")
    results: list[SampleResult] = []
    with _collector_paused():  # a fifth of the build is the collector walking new objects
        rows = zip(unit.tolist(), verdicts.tolist(), gen.gamma(2.0, 0.6, n).tolist(), fate.tolist(),
                   spread.tolist())  # fmt: skip
        for i, (values, (faith, correct), latency, doom, tenths) in enumerate(rows):
            scores: dict[str, float | None] = dict(zip(unit_names, values))
            scores.update(
                faithfulness=faith,
                faithfulness_norm=(faith - 1) / 4,
                correctness=correct,
                correctness_norm=(correct - 1) / 4,
                latency_s=latency,
            )
            errors: dict[str, Failure] = {}
            judgments = {
                "faithfulness": verdict(faith, i % len(reasons), tenths),
                "correctness": verdict(correct, (i + 1) % len(reasons), tenths),
            }
            if doom < 0.01:
                judgments["faithfulness"] = unscored
                errors = {"faithfulness": no_verdict, "faithfulness_norm": no_verdict}
                scores["faithfulness"] = scores["faithfulness_norm"] = None
            elif doom < 0.015:
                errors = {"bertscore_f1": oom}
                scores["bertscore_f1"] = None
            k = i % len(rankings)
            sample = _construct(
                Sample,
                id=f"q{i:07d}",
                question=questions[i % len(questions)],
                contexts=rankings[k],
                answer=answers[i % len(answers)],
                references=refs[i % len(refs)],
                relevance=tables[k],
                metadata={},
                turns=None,
            )
            results.append(
                _construct(
                    SampleResult,
                    id=sample.id,
                    scores=scores,
                    errors=errors,
                    judgments=judgments,
                    sample=sample,
                    units=[],
                    degraded=[],
                )
            )
    return Report.model_construct(
        summary=_summary(results),
        samples=results,
        signatures={m: Signature(name=m, options={"version": "0.1.0"}) for m in METRICS},
        usage=_usage(n),
        config={"name": f"synthetic-{n}", "dataset": "synthetic.jsonl"},
        created="2025-01-01T00:00:00+00:00",
        rag_judge_version="0.1.0",
    )


@contextmanager
def _collector_paused() -> Iterator[None]:
    collecting = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if collecting:
            gc.enable()


def _construct(cls: type[M], **values: Any) -> M:
    """``cls.model_construct(**values)`` for a value of every field, without its per-field
    loop (a third of the time of building 100,000 samples): what it sets, set directly."""
    model = cls.__new__(cls)
    object.__setattr__(model, "__dict__", values)
    object.__setattr__(model, "__pydantic_fields_set__", set(values))
    object.__setattr__(model, "__pydantic_extra__", None)
    object.__setattr__(model, "__pydantic_private__", None)
    return model


def _summary(results: list[SampleResult]) -> dict[str, MetricSummary]:
    out: dict[str, MetricSummary] = {}
    for metric, (kind, scale, normalises) in METRICS.items():
        col = np.array([r.scores[metric] for r in results], dtype=float)
        values = col[~np.isnan(col)]
        failed = [r.errors[metric] for r in results if r.errors and metric in r.errors]
        mean = math.fsum(values.tolist()) / values.size if values.size else None
        half = 1.96 * float(values.std()) / math.sqrt(values.size) if values.size else 0.0
        out[metric] = MetricSummary(
            mean=mean,
            ci_low=None if mean is None else mean - half,
            ci_high=None if mean is None else mean + half,
            n=int(values.size),
            errors=len(failed),
            unscored=sum(f.kind is FailureKind.UNSCORED for f in failed),
            kind=kind,
            scale=scale,
            normalises=normalises,
        )
    return out


def _usage(n: int) -> Usage:
    return Usage(requests=2 * n, prompt_tokens=900 * n, completion_tokens=60 * n)


def main(argv: list[str]) -> None:
    """Build, render and time a report of each size given (default 10,000 and 100,000)."""
    from rag_judge.report.html import render_html

    for n in [int(a.replace(",", "").replace("_", "")) for a in argv] or [10_000, 100_000]:
        t0 = time.perf_counter()
        report = big_report(n)
        gc.collect()  # the objects built with the collector paused: once, not in the render
        t1 = time.perf_counter()
        page = render_html(report)
        t2 = time.perf_counter()
        size = len(page.encode("utf-8"))
        inline = page.count("<details ")
        print(
            f"n={n:,}  build {t1 - t0:.1f} s  render {t2 - t1:.2f} s  "
            f"report.html {size / 1e6:.2f} MB  ({inline:,} samples inline)",
            flush=True,
        )


if __name__ == "__main__":
    main(sys.argv[1:])
