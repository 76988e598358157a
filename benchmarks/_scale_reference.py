"""The reference for benchmarks/scale.py: the same scores from the reference libraries, called
directly on the same dataset, step by step.

- retrieval: pytrec_eval (P@5, recall@10, reciprocal rank, AP, nDCG@10) over qrels and a run
  built from each sample's ``relevance`` and context scores;
- rouge: rouge-score's ``RougeScorer`` (rouge1/2/L/Lsum, no stemmer), ``score_multi`` per sample;
- bleu: sacrebleu's sentence BLEU per sample (one ``BLEU(effective_order=True)``, its fastest
  direct use) and corpus BLEU over all samples.

Each step reads the dataset itself (``json.loads`` per line, inside its timing), as each
rag-judge step streams it (the step's time, from the CLI's step lines, includes reading and
validating its chunks). The judge step has no reference (its client is a stub). The reference
runs in a child process of its own: a child's peak RSS (ru_maxrss) counts its parent's pages at
fork, so a parent that had loaded the dataset would inflate the next ``rag-judge run``'s figure.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

__all__ = ["REFERENCE", "reference_times"]

# rag-judge's step (the evaluator's type) -> the library that computes the same scores.
REFERENCE = {"retrieval": "pytrec_eval", "rouge": "rouge-score", "bleu": "sacrebleu"}
_MEASURES = {"P.5", "recall.10", "recip_rank", "map", "ndcg_cut.10"}


def _retrieval(rows: list[dict[str, Any]]) -> Callable[[], object]:
    import pytrec_eval

    qrels = {r["id"]: {d: int(g) for d, g in r["relevance"].items()} for r in rows}
    run = {r["id"]: {c["id"]: float(c["score"]) for c in r["contexts"]} for r in rows}
    return lambda: pytrec_eval.RelevanceEvaluator(qrels, _MEASURES).evaluate(run)


def _rouge(rows: list[dict[str, Any]]) -> Callable[[], object]:
    from rouge_score import rouge_scorer

    scorer = rouge_scorer.RougeScorer(["rouge1", "rouge2", "rougeL", "rougeLsum"])
    return lambda: [scorer.score_multi(r["references"], r["answer"]) for r in rows]


def _bleu(rows: list[dict[str, Any]]) -> Callable[[], object]:
    import sacrebleu

    hyps = [r["answer"] for r in rows]
    refs = [r["references"] for r in rows]
    width = max(map(len, refs))
    streams = [[r[j] if j < len(r) else None for r in refs] for j in range(width)]

    def run() -> object:
        sentence = sacrebleu.BLEU(effective_order=True)
        scores = [sentence.sentence_score(h, r).score for h, r in zip(hyps, refs)]
        return scores, sacrebleu.BLEU().corpus_score(hyps, streams).score

    return run


def reference_times(dataset: Path) -> dict[str, float]:
    """Seconds of each step's reference over the whole dataset, measured in a child process."""
    out = subprocess.run([sys.executable, __file__, str(dataset)], capture_output=True,
                         text=True, check=True)  # fmt: skip
    times: dict[str, float] = json.loads(out.stdout)
    return times


def _measure(dataset: Path) -> dict[str, float]:
    out: dict[str, float] = {}
    for step, make in (("retrieval", _retrieval), ("rouge", _rouge), ("bleu", _bleu)):
        start = time.perf_counter()
        with dataset.open(encoding="utf-8") as f:
            rows = [json.loads(line) for line in f]
        make(rows)()
        out[step] = time.perf_counter() - start
        del rows
    return out


def print_comparison(n: int, reference: dict[str, float], steps: dict[str, float]) -> None:
    """One line per step: the reference library's seconds, rag-judge's step, the ratio."""
    for step, seconds in reference.items():
        ours = steps.get(step)
        if ours:
            print(f"n={n:,} {step}: {REFERENCE[step]} {seconds:.2f} s, rag-judge step "
                  f"{ours:.2f} s, ratio {seconds / ours:.2f}x")  # fmt: skip


if __name__ == "__main__":
    print(json.dumps(_measure(Path(sys.argv[1]))))
