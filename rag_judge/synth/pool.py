"""Candidate chunks for a question: BM25 neighbours (``bm25s``) and, when a model is
configured, dense neighbours (a sentence embedding). docs/synth.md has the rules.

Both pools score every chunk and order by score, the higher first, and a tie by the lower
chunk index. bm25s's own numpy top-k leaves the order of tied scores to an unstable argsort
(it varies with k and with the CPU's sort kernels); its JAX top-k orders them so.
"""

from __future__ import annotations

import importlib
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from rag_judge import _progress as progress
from rag_judge.synth.corpus import Chunk

__all__ = ["BM25_INSTALL_HINT", "DEFAULT_DENSE_MODEL", "BM25Pool", "DensePool", "import_bm25s"]

BM25_INSTALL_HINT = "pip install 'rag-judge[synth]'"
DEFAULT_DENSE_MODEL = "all-MiniLM-L6-v2"
DENSE_HINT = "pip install 'rag-judge[bertscore]'"
# bm25s's defaults, stated so that a change of theirs does not change a pool.
_BM25 = {"method": "lucene", "k1": 1.5, "b": 0.75}
_STOPWORDS = "en"


def import_bm25s() -> Any:
    """bm25s, or an ImportError that says how to install it."""
    try:
        return importlib.import_module("bm25s")
    except ImportError as exc:
        raise ImportError(f"the BM25 pool needs the bm25s package: {BM25_INSTALL_HINT}") from exc


def _top(scores: Any, k: int) -> list[tuple[int, float]]:
    """(index, score) of the ``k`` best positive scores: score descending, ties by index."""
    scores = np.asarray(scores)
    hits = np.flatnonzero(scores > 0)
    order = hits[np.lexsort((hits, -scores[hits]))][: max(k, 0)]
    return [(int(i), float(scores[i])) for i in order]


class BM25Pool:
    """BM25 over the chunks' texts with bm25s (lucene, k1 1.5, b 0.75), lower-cased words of
    two or more letters and digits, English stopwords removed, no stemming."""

    def __init__(self, chunks: Sequence[Chunk]) -> None:
        bm25s = import_bm25s()
        self._bm25s = bm25s
        self.size = len(chunks)
        self._retriever: Any = None
        if chunks:
            tokens = bm25s.tokenize(
                [c.text for c in chunks], stopwords=_STOPWORDS, show_progress=False
            )
            self._retriever = bm25s.BM25(**_BM25)
            self._retriever.index(tokens, show_progress=False)

    def tokens(self, query: str) -> list[str]:
        """The query's words as bm25s tokenizes them."""
        tokenized = self._bm25s.tokenize(
            query, stopwords=_STOPWORDS, return_ids=False, show_progress=False
        )
        return [str(t) for t in tokenized[0]]

    def scores(self, query: str) -> Any:
        """bm25s's score of every chunk for ``query`` (float32; all 0 for a query with no word
        in the corpus)."""
        tokens = self.tokens(query)
        if self._retriever is None or not tokens:
            return np.zeros(self.size, dtype=np.float32)
        return self._retriever.get_scores(tokens)

    def search(self, query: str, k: int) -> list[tuple[int, float]]:
        """At most ``k`` (chunk index, score) with a score above 0, the best first; a score is
        bm25s's float32 value as a Python float."""
        return _top(self.scores(query), k)


class DensePool:
    """Cosine similarity of sentence embeddings: the model's last hidden state mean-pooled
    over the attention mask and L2-normalised, as sentence-transformers' all-MiniLM-L6-v2.
    The model loads offline (the packaged all-MiniLM-L6-v2, a local folder or a Hugging Face
    id already cached); chunks are embedded in batches of ``batch_size``."""

    def __init__(
        self,
        chunks: Sequence[Chunk],
        model: str = DEFAULT_DENSE_MODEL,
        *,
        batch_size: int = 32,
        device: str = "cpu",
    ) -> None:
        from rag_judge.metrics.bertscore.models import import_torch, resolve_model_dir

        try:
            self._torch = import_torch()
        except ImportError as exc:
            raise ImportError(f"the dense pool needs torch and transformers: {DENSE_HINT}") from exc
        from transformers import AutoModel, AutoTokenizer

        folder = resolve_model_dir(model)
        self.model = model
        self._device = device
        self._tokenizer = AutoTokenizer.from_pretrained(folder, local_files_only=True)
        with progress.no_library_bars():
            encoder = AutoModel.from_pretrained(folder, local_files_only=True)
        self._encoder = encoder.to(device).eval()
        self._max_length = _max_length(folder, self._tokenizer)
        self._batch_size = max(batch_size, 1)
        self._vectors = self.embed([c.text for c in chunks])

    def embed(self, texts: Sequence[str]) -> Any:
        """Unit vectors of ``texts`` (a float32 array, one row a text), in batches."""
        torch = self._torch
        rows = []
        with torch.inference_mode():
            for at in range(0, len(texts), self._batch_size):
                batch = self._tokenizer(
                    list(texts[at : at + self._batch_size]),
                    padding=True,
                    truncation=True,
                    max_length=self._max_length,
                    return_tensors="pt",
                ).to(self._device)
                hidden = self._encoder(**batch).last_hidden_state
                mask = batch["attention_mask"].unsqueeze(-1).to(hidden.dtype)
                mean = (hidden * mask).sum(dim=1) / mask.sum(dim=1).clamp(min=1e-9)
                unit = torch.nn.functional.normalize(mean, p=2, dim=1)
                rows.append(unit.float().cpu().numpy())
        if not rows:
            return np.zeros((0, 0), dtype=np.float32)
        return np.concatenate(rows)

    def scores(self, query: str) -> Any:
        """The cosine similarity of ``query`` to every chunk (float32)."""
        if len(self._vectors) == 0:
            return np.zeros(0, dtype=np.float32)
        return self._vectors @ self.embed([query])[0]

    def search(self, query: str, k: int) -> list[tuple[int, float]]:
        """At most ``k`` (chunk index, cosine) with a cosine above 0, the best first."""
        return _top(self.scores(query), k)


def _max_length(folder: Path, tokenizer: Any) -> int:
    """The model's input limit in tokens: sentence-transformers' ``max_seq_length`` (256 for
    all-MiniLM-L6-v2) when the folder states one, else the tokenizer's (512 when unstated)."""
    try:
        config = json.loads((folder / "sentence_bert_config.json").read_text(encoding="utf-8"))
        return int(config["max_seq_length"])
    except (OSError, ValueError, KeyError, TypeError):
        from rag_judge.metrics.bertscore.models import max_tokens

        return max_tokens(tokenizer)
