"""Generation metrics: rag-judge's ROUGE, BLEU, chrF and TER vs rouge-score / sacrebleu calls.

    python benchmarks/generation.py                  # 10,000 pairs of ~25 words
    python benchmarks/generation.py --pairs 2000     # smaller
    python benchmarks/generation.py --sections rouge,bleu
    python benchmarks/generation.py --sections chrf,ter

Times, in one process on the same generated pairs (CPU time, --repeat rounds, interleaved):
  ROUGE  each type alone (texts broken into lines, so rougeLsum works sentence by sentence):
         RougeEvaluator(rouge_types=[type]).evaluate vs rouge-score's RougeScorer([type])
         .score_multi per pair; goal >= 2.5x, bit-exact;
  BLEU   sentence BLEU per pair + corpus BLEU: BleuEvaluator.evaluate (+ the report's corpus
         score) vs sacrebleu.sentence_bleu per pair + sacrebleu.corpus_bleu; goal >= 3x,
         bit-exact;
  chrF   (chrF and chrF++) and TER the same way: ChrfEvaluator / TerEvaluator.evaluate (+ the
         report's corpus score) vs sacrebleu's CHRF / TER object's sentence_score per pair +
         corpus_score; goal >= 3x, equal (==) sentence and corpus scores;
in CPU seconds; checks that the numbers are equal and prints reference, ours and the ratio.
If benchmarks/bertscore.py exists, its ``bertscore_section(args)`` runs too (section
"bertscore"); an optional ``add_arguments(parser)`` there adds its options to this command line.
"""

from __future__ import annotations

import argparse
import gc
import importlib.util
import random
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

ROUGE_TYPES = ["rouge1", "rouge2", "rougeL", "rougeLsum"]
_VOCAB_TEXT = (
    "the of and to in a is that for it as was with be by on not he this are or his from at "
    "which but have an they you were her she there been one all we their has would when if "
    "so no will more can said who its into time only new some could these two may first then "
    "do any like my now over such our man me even most made after also did many before must "
    "through back years where much your way well down should because each just those people "
    "how too little state good very make world still own see men work long get here between "
    "both life being under never day same another know while last might us great old year off "
    "come since against go came right used take three retrieval answer model paris ocean"
)
_VOCAB = _VOCAB_TEXT.split()


def make_pairs(n: int, words: int, refs: int, seed: int) -> tuple[list[str], list[list[str]]]:
    """~``words``-word answers with 1..``refs`` references that share most of their words."""
    rng = random.Random(seed)
    weights = [1.0 / (rank + 1) for rank in range(len(_VOCAB))]  # Zipf-like
    hyps, refss = [], []
    for _ in range(n):
        base = rng.choices(_VOCAB, weights, k=max(1, words + rng.randint(-5, 5)))
        hyp = list(base)
        for _ in range(len(hyp) // 5):  # substitutions
            hyp[rng.randrange(len(hyp))] = rng.choice(_VOCAB)
        hyps.append(" ".join(hyp).capitalize() + ".")
        group = []
        for _ in range(rng.randint(1, refs)):
            ref = [w for w in base if rng.random() < 0.9]
            ref += rng.choices(_VOCAB, weights, k=rng.randint(0, 3))
            group.append(" ".join(ref).capitalize() + ".")
        refss.append(group)
    return hyps, refss


def timed(repeat: int, *fns: Callable[[], Any]) -> list[tuple[list[float], Any]]:
    """CPU seconds of each function in each of ``repeat`` rounds, and its last output.

    Process CPU time, not wall time: the code is single-threaded, and on a shared machine CPU
    time leaves out the time other processes hold the core. The functions run interleaved, so
    drift hits all alike, with the garbage collector off (as timeit does) so that one side's
    live results do not slow the other's collections.
    """
    times: list[list[float]] = [[] for _ in fns]
    outs: list[Any] = [None] * len(fns)
    for _ in range(repeat):
        for k, fn in enumerate(fns):
            outs[k] = None
            gc.collect()
            gc.disable()
            try:
                start = time.process_time()
                outs[k] = fn()
                times[k].append(time.process_time() - start)
            finally:
                gc.enable()
    return list(zip(times, outs))


def report(
    name: str, ours: list[float], direct: list[float], note: str = "", goal: float | None = None
) -> None:
    """Best times, the reference's over ours (how many times faster rag-judge is), and the
    median of the per-round ratios (robust to noise)."""
    paired = statistics.median(d / o for o, d in zip(ours, direct))
    aim = f"  (goal >= {goal}x)" if goal else ""
    print(
        f"{name:<24} reference {min(direct):7.3f}s  rag-judge {min(ours):7.3f}s  "
        f"{min(direct) / min(ours):5.2f}x faster (median of rounds {paired:5.2f}x){aim}  {note}"
    )


def with_lines(text: str, rng: random.Random) -> str:
    """``text`` broken into lines of 5..12 words: rougeLsum then works sentence by sentence."""
    words, lines = text.split(" "), []
    while words:
        take = rng.randint(5, 12)
        lines.append(" ".join(words[:take]))
        words = words[take:]
    return "\n".join(lines)


def rouge_section(args: argparse.Namespace, hyps: list[str], refs: list[list[str]]) -> None:
    from rouge_score import rouge_scorer

    from rag_judge import Sample
    from rag_judge.evaluators.rouge import RougeEvaluator

    rng = random.Random(args.seed)
    hyps = [with_lines(h, rng) for h in hyps]
    refs = [[with_lines(r, rng) for r in group] for group in refs]
    samples = [
        Sample(id=str(i), answer=h, references=r) for i, (h, r) in enumerate(zip(hyps, refs))
    ]
    print("ROUGE: texts in lines of 5..12 words; each type alone, as RougeScorer([type])")
    for rtype in ROUGE_TYPES:
        evaluator = RougeEvaluator(rouge_types=[rtype], use_stemmer=args.stem)

        def direct(rtype: str = rtype) -> list[dict[str, Any]]:
            scorer = rouge_scorer.RougeScorer([rtype], use_stemmer=args.stem)
            return [scorer.score_multi(r, h) for h, r in zip(hyps, refs)]

        def ours(ev: RougeEvaluator = evaluator) -> Any:
            return ev.evaluate(samples)

        (t_direct, theirs), (t_ours, out) = timed(args.repeat, direct, ours)
        same = all(
            out.scores[f"{rtype}_{m}"][i] == getattr(s[rtype], attr)
            for i, s in enumerate(theirs)
            for m, attr in (("precision", "precision"), ("recall", "recall"), ("f1", "fmeasure"))
        )
        report(f"ROUGE {rtype} (P/R/F)", t_ours, t_direct, "bit-exact" if same else "DIFFERS",
               goal=2.5)  # fmt: skip


def bleu_section(args: argparse.Namespace, hyps: list[str], refs: list[list[str]]) -> None:
    import sacrebleu

    from rag_judge import Sample
    from rag_judge.evaluators.sacrebleu import BleuEvaluator

    samples = [
        Sample(id=str(i), answer=h, references=r) for i, (h, r) in enumerate(zip(hyps, refs))
    ]
    width = max(map(len, refs))
    streams: list[list[Any]] = [[r[j] if j < len(r) else None for r in refs] for j in range(width)]
    evaluator = BleuEvaluator()

    def direct() -> tuple[list[float], float]:
        sentence = [sacrebleu.sentence_bleu(h, r).score / 100 for h, r in zip(hyps, refs)]
        return sentence, sacrebleu.corpus_bleu(hyps, streams).score / 100

    def direct_reused() -> tuple[list[float], float]:
        # The fastest direct route: one BLEU object per setting, so tokenizers are built once.
        sent = sacrebleu.BLEU(effective_order=True)
        sentence = [sent.sentence_score(h, r).score / 100 for h, r in zip(hyps, refs)]
        return sentence, sacrebleu.BLEU().corpus_score(hyps, streams).score / 100

    def ours() -> tuple[list[float | None], float]:
        out = evaluator.evaluate(samples)
        corpus = out.corpus["bleu"]
        return out.scores["bleu"], corpus.score(corpus.rows)  # what the report's summary does

    runs = timed(args.repeat, direct, direct_reused, ours)
    (t_direct, (d_sent, d_corpus)), (t_reused, _), (t_ours, (o_sent, o_corpus)) = runs
    worst = max(abs(a - b) for a, b in zip(o_sent, d_sent) if a is not None)
    assert o_corpus == d_corpus, (o_corpus, d_corpus)
    note = f"max |diff| {worst:.1e}, corpus BLEU {o_corpus:.4f} (equal)"
    report("BLEU sentence + corpus", t_ours, t_direct, note)
    report("BLEU vs reused BLEU objects", t_ours, t_reused)


def sacre_section(
    args: argparse.Namespace, hyps: list[str], refs: list[list[str]], family: str
) -> None:
    """chrF, chrF++ or TER: rag-judge's evaluator against one sacrebleu object per setting."""
    import sacrebleu

    from rag_judge import Sample
    from rag_judge.evaluators.sacrebleu import ChrfEvaluator, TerEvaluator

    samples = [
        Sample(id=str(i), answer=h, references=r) for i, (h, r) in enumerate(zip(hyps, refs))
    ]
    width = max(map(len, refs))
    streams: list[list[Any]] = [[r[j] if j < len(r) else None for r in refs] for j in range(width)]
    settings: list[tuple[str, Any, Any, str]] = (
        [
            ("chrF", sacrebleu.CHRF(), ChrfEvaluator(), "chrf"),
            ("chrF++", sacrebleu.CHRF(word_order=2), ChrfEvaluator(word_order=2), "chrf++"),
        ]
        if family == "chrf"
        else [
            ("TER", sacrebleu.TER(), TerEvaluator(), "ter"),
            ("TER normalized", sacrebleu.TER(normalized=True), TerEvaluator(normalized=True),
             "ter"),
        ]
    )  # fmt: skip
    cap = 1.0 if family == "chrf" else float("inf")  # rag-judge's chrF is on [0, 1]
    for name, metric, evaluator, key in settings:

        def direct(metric: Any = metric) -> tuple[list[float], float]:
            sentence = [metric.sentence_score(h, r).score / 100 for h, r in zip(hyps, refs)]
            return sentence, metric.corpus_score(hyps, streams).score / 100

        def ours(ev: Any = evaluator, key: str = key) -> tuple[list[float | None], float]:
            out = ev.evaluate(samples)
            corpus = out.corpus[key]
            return out.scores[key], corpus.score(corpus.rows)  # what the report's summary does

        (t_direct, (d_sent, d_corpus)), (t_ours, (o_sent, o_corpus)) = timed(
            args.repeat, direct, ours
        )
        assert o_sent == [min(x, cap) for x in d_sent], name
        assert o_corpus == min(d_corpus, cap), (o_corpus, d_corpus)
        note = f"sentence and corpus equal (==), corpus {name} {o_corpus:.4f}"
        report(f"{name} sentence + corpus", t_ours, t_direct, note, goal=3)


def _bertscore_module() -> ModuleType | None:
    """benchmarks/bertscore.py, written separately, if it is there."""
    path = Path(__file__).with_name("bertscore.py")
    if not path.exists():
        return None
    spec = importlib.util.spec_from_file_location("_bench_bertscore", path)
    if spec is None or spec.loader is None:
        return None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--pairs", type=int, default=10_000)
    ap.add_argument("--words", type=int, default=25, help="about this many words per answer")
    ap.add_argument("--refs", type=int, default=2, help="1..REFS references per answer")
    ap.add_argument("--repeat", type=int, default=3, help="timed rounds (best and median reported)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--stem", action="store_true", help="ROUGE with the Porter stemmer")
    ap.add_argument("--sections", default="rouge,bleu,chrf,ter,bertscore", help="comma-separated")
    bertscore = _bertscore_module()
    if bertscore is not None and hasattr(bertscore, "add_arguments"):
        bertscore.add_arguments(ap)
    args = ap.parse_args()
    sections = {s.strip() for s in args.sections.split(",") if s.strip()}

    hyps, refs = make_pairs(args.pairs, args.words, args.refs, args.seed)
    n_refs = sum(map(len, refs))
    print(
        f"{args.pairs} pairs, {sum(len(h.split()) for h in hyps) / len(hyps):.1f} words per "
        f"answer, {n_refs / len(refs):.2f} references per answer; {args.repeat} rounds; "
        f"Python {sys.version.split()[0]}"
    )
    if "rouge" in sections:
        rouge_section(args, hyps, refs)
    if "bleu" in sections:
        bleu_section(args, hyps, refs)
    for family in ("chrf", "ter"):
        if family in sections:
            sacre_section(args, hyps, refs, family)
    # ---- BERTScore: benchmarks/bertscore.py (another file) provides bertscore_section(args) ----
    if "bertscore" in sections:
        if bertscore is None:
            print("BERTScore: skipped (benchmarks/bertscore.py not found)")
        else:
            bertscore.bertscore_section(args)


if __name__ == "__main__":
    main()
