"""Synthetic RAG samples for benchmarks/scale.py, written as JSONL one row at a time.

Each sample: a question (~50-100 chars), 10 ranked contexts with doc ids, retrieval scores and
texts of 200-400 chars, graded relevance (0-3) for about half of the retrieved docs plus 0-2
judged docs that were not retrieved, an answer of ~160-240 chars that mostly restates its best
context, and one or two references close to the answer. The texts are windows into one seeded
stream of Zipf-distributed pseudo-words, so every context is distinct text at the cost of a
slice, and the same seed writes the same bytes.
"""

from __future__ import annotations

import bisect
import itertools
import json
import random
from pathlib import Path

__all__ = ["TextPool", "make_vocabulary", "sample_row", "write_dataset"]

CONTEXTS = 10
POOL_WORDS = 500_000  # ~3.5 MB of text to take windows from
_SYLLABLE_TEXT = "ka lo mi ne ru sa ti vo be da fe gu ho ji pe qua re si to un ver wa xi yo ze"
_FUNCTION_TEXT = (
    "the of and to in a is that for it as was with be by on not this are or from at which but "
    "have an they were has would when if will more can who its into only some could these"
)
_SYLLABLES = _SYLLABLE_TEXT.split()
_FUNCTION_WORDS = _FUNCTION_TEXT.split()


def make_vocabulary(rng: random.Random, size: int = 6000) -> list[str]:
    """Function words first, then ``size`` pseudo-words of 1-4 syllables (Zipf rank order)."""
    words = set(_FUNCTION_WORDS)
    vocab = list(_FUNCTION_WORDS)
    while len(vocab) < size:
        word = "".join(rng.choices(_SYLLABLES, k=rng.randint(1, 4)))
        if word not in words:
            words.add(word)
            vocab.append(word)
    return vocab


class TextPool:
    """One long seeded text and its word offsets: ``window(start_word, chars)`` is a slice that
    starts and ends on word boundaries, so making a text costs a bisect and a slice."""

    def __init__(self, rng: random.Random, vocab: list[str], words: int = POOL_WORDS) -> None:
        cum = list(itertools.accumulate(1.0 / (rank + 1) for rank in range(len(vocab))))
        stream = rng.choices(vocab, cum_weights=cum, k=words)
        self.text = " ".join(stream)
        self.starts = list(itertools.accumulate((len(w) + 1 for w in stream[:-1]), initial=0))
        self.vocab = vocab
        self.cum_weights = cum  # choices() with cum_weights bisects; weights= sums every call

    def window(self, word: int, chars: int) -> str:
        start = self.starts[word]
        end = bisect.bisect_right(self.starts, start + chars, lo=word + 1) - 1
        return self.text[start : self.starts[end] - 1 if end > word else start + chars]

    def random_window(self, rng: random.Random, low: int, high: int) -> tuple[int, str]:
        chars = rng.randint(low, high)
        word = rng.randrange(len(self.starts) - chars)  # a word is >= 1 char: room for `chars`
        return word, self.window(word, chars)

    def words(self, rng: random.Random, k: int) -> list[str]:
        return rng.choices(self.vocab, cum_weights=self.cum_weights, k=k)

    def perturb(self, rng: random.Random, words: list[str], rate: float) -> list[str]:
        """Replace about ``rate`` of the words with vocabulary words (Zipf-weighted)."""
        out = list(words)
        for w in self.words(rng, int(len(out) * rate)):
            out[rng.randrange(len(out))] = w
        return out


def sample_row(i: int, rng: random.Random, pool: TextPool, corpus: int) -> dict[str, object]:
    """Sample ``i``: its id, question, ranked contexts, relevance, answer and references."""
    doc_ids = rng.sample(range(corpus), CONTEXTS + 2)  # the last two: judged, not retrieved
    contexts = []
    starts = []
    score = 30.0 + rng.random() * 10
    for d in doc_ids[:CONTEXTS]:
        word, text = pool.random_window(rng, 200, 400)
        starts.append(word)
        contexts.append({"id": f"d{d}", "text": text, "score": round(score, 4)})
        score -= rng.random() * 2
    relevance: dict[str, int] = {}
    for rank, ctx in enumerate(contexts):  # higher ranks judged (and relevant) more often
        if rng.random() < 0.8 - 0.06 * rank:
            relevance[str(ctx["id"])] = rng.choices((0, 1, 2, 3), (4, 3, 2, 1 + (rank < 3) * 2))[0]
    for d in doc_ids[CONTEXTS : CONTEXTS + rng.randint(0, 2)]:
        relevance[f"d{d}"] = rng.randint(1, 3)
    best = max(range(CONTEXTS), key=lambda r: (relevance.get(str(contexts[r]["id"]), -1), -r))
    answer_words = pool.perturb(rng, pool.window(starts[best], rng.randint(160, 240)).split(), 0.2)
    references = []
    for _ in range(rng.randint(1, 2)):
        kept = [w for w in answer_words if rng.random() < 0.85]
        kept += pool.words(rng, rng.randint(0, 4))
        references.append(" ".join(pool.perturb(rng, kept, 0.1)).capitalize() + ".")
    question = pool.random_window(rng, 50, 100)[1].capitalize() + "?"
    return {
        "id": f"q{i:07d}",
        "question": question,
        "contexts": contexts,
        "answer": " ".join(answer_words).capitalize() + ".",
        "references": references,
        "relevance": relevance,
    }


def write_dataset(path: Path, n: int, seed: int = 0, batch: int = 1000) -> int:
    """Write ``n`` samples to ``path`` as JSONL, ``batch`` rows per write (memory stays flat
    whatever ``n``); returns the file's size in bytes."""
    rng = random.Random(seed)
    pool = TextPool(rng, make_vocabulary(rng))
    corpus = max(1000, 20 * n)  # doc ids repeat across queries only now and then
    with path.open("w", encoding="utf-8") as f:
        for first in range(0, n, batch):
            rows = (sample_row(i, rng, pool, corpus) for i in range(first, min(n, first + batch)))
            f.write("".join(json.dumps(r, separators=(",", ":")) + "\n" for r in rows))
    return path.stat().st_size
