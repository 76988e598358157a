"""sacrebleu's chrF statistics (``CHRF._extract_corpus_statistics``): the same integers, faster.

sacrebleu counts each text's n-grams in ``Counter`` objects, one text at a time. Here a batch
of texts is one array of character (or word) ids; an n-gram is an integer built from its ids,
so one sort per order counts every text's n-grams, and a binary search finds each reference
n-gram's count in its hypothesis. The reference with the best sentence chrF is picked by
:func:`f_scores`, a transcription of ``CHRF._compute_f_score`` on arrays (the same operations in
the same order, so the same floats; :func:`f_score` is the scalar one).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from numpy.typing import NDArray

__all__ = ["chrf_rows", "f_score", "f_scores"]

CHRF_BATCH = 2_048  # pairs counted at once: bounds the arrays and the bits of a text id
_KEY_BITS = 62  # a (text, n-gram) key must stay below 2**62

_PUNCTS = set("!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~")  # CHRF._PUNCTS


def f_score(stats: Sequence[int], order: int, beta: int, eps_smoothing: bool) -> float:
    """``CHRF(...)._compute_f_score(stats)`` for ``order`` n-gram orders, on [0, 100]."""
    eps = 1e-16
    score = 0.0
    effective_order = 0
    factor = beta**2
    avg_prec, avg_rec = 0.0, 0.0
    for i in range(order):
        n_hyp, n_ref, n_match = stats[3 * i : 3 * i + 3]
        prec = n_match / n_hyp if n_hyp > 0 else eps
        rec = n_match / n_ref if n_ref > 0 else eps
        denom = factor * prec + rec
        score += ((1 + factor) * prec * rec / denom) if denom > 0 else eps
        if n_hyp > 0 and n_ref > 0:
            avg_prec += prec
            avg_rec += rec
            effective_order += 1
    if eps_smoothing:
        return 100 * score / order
    if effective_order == 0:
        avg_prec = avg_rec = 0.0
    else:
        avg_prec /= effective_order
        avg_rec /= effective_order
    if avg_prec + avg_rec:
        score = (1 + factor) * avg_prec * avg_rec
        score /= (factor * avg_prec) + avg_rec
        return 100 * score
    return 0.0


def f_scores(
    stats: NDArray[np.int64], order: int, beta: int, eps_smoothing: bool
) -> NDArray[np.float64]:
    """:func:`f_score` of each row of ``stats``, the same floats (elementwise IEEE operations in
    the scalar function's order; numpy fuses none of them)."""
    eps = 1e-16
    counts = stats.astype(np.float64)
    rows = len(stats)
    score = np.zeros(rows)
    effective = np.zeros(rows, dtype=np.int64)
    avg_prec, avg_rec = np.zeros(rows), np.zeros(rows)
    factor = float(beta**2)
    for i in range(order):
        n_hyp, n_ref, n_match = counts[:, 3 * i], counts[:, 3 * i + 1], counts[:, 3 * i + 2]
        has_hyp, has_ref = n_hyp > 0, n_ref > 0
        prec = np.where(has_hyp, n_match / np.where(has_hyp, n_hyp, 1.0), eps)
        rec = np.where(has_ref, n_match / np.where(has_ref, n_ref, 1.0), eps)
        denom = factor * prec + rec
        safe = np.where(denom > 0, denom, 1.0)
        score = score + np.where(denom > 0, (1 + factor) * prec * rec / safe, eps)
        both = has_hyp & has_ref
        avg_prec = np.where(both, avg_prec + prec, avg_prec)
        avg_rec = np.where(both, avg_rec + rec, avg_rec)
        effective += both
    if eps_smoothing:
        return np.asarray(100 * score / order, dtype=np.float64)
    some = effective > 0
    divisor = np.where(some, effective, 1).astype(np.float64)
    avg_prec = np.where(some, avg_prec / divisor, 0.0)
    avg_rec = np.where(some, avg_rec / divisor, 0.0)
    total = avg_prec + avg_rec
    f = (1 + factor) * avg_prec * avg_rec
    f = f / np.where(total != 0, (factor * avg_prec) + avg_rec, 1.0)
    return np.where(total != 0, 100 * f, 0.0)


def _words(sent: str) -> list[str]:
    """``CHRF._remove_punctuation``: punctuation split off the start or end of a word."""
    tokenized: list[str] = []
    for w in sent.split():
        if len(w) == 1:
            tokenized.append(w)
        elif w[-1] in _PUNCTS:
            tokenized += [w[:-1], w[-1]]
        elif w[0] in _PUNCTS:
            tokenized += [w[0], w[1:]]
        else:
            tokenized.append(w)
    return tokenized


def _dense(codes: NDArray[np.int64]) -> tuple[NDArray[np.int64], int]:
    """Ids 0..V-1 in place of arbitrary non-negative codes, and V."""
    if not len(codes):
        return codes, 1
    uniq, inverse = np.unique(codes, return_inverse=True)
    return inverse.reshape(-1).astype(np.int64), max(len(uniq), 1)


def _matches(
    ids: NDArray[np.int64], lengths: NDArray[np.int64], hyps: int, ref_pair: NDArray[np.int64],
    orders: int,
) -> NDArray[np.int64]:  # fmt: skip
    """``[hyp, ref, match]`` counts per order (columns) of each reference text.

    ``ids`` are the texts' symbols end to end (hypotheses first, then references); the
    reference ``r`` belongs to the pair ``ref_pair[r]``."""
    texts = len(lengths)
    refs = texts - hyps
    out = np.zeros((refs, 3 * orders), dtype=np.int64)
    text_of = np.repeat(np.arange(texts, dtype=np.int64), lengths)
    ends = np.cumsum(lengths)
    left = np.repeat(ends, lengths) - np.arange(len(ids), dtype=np.int64)  # symbols from here on
    symbols, base = _dense(ids)
    text_bits = max(int(texts).bit_length(), 1)
    keys, bound = symbols, base
    for n in range(1, orders + 1):
        if n > 1:
            size = len(ids) - n + 1
            if bound * base >= 1 << (_KEY_BITS - text_bits):  # too wide: renumber the n-grams
                keys, bound = _dense(keys[: size + 1] * (left[: size + 1] >= n - 1))
            keys = keys[:size] * base + symbols[n - 1 : n - 1 + size]
            bound *= base
        valid = left[: len(keys)] >= n
        grams = np.unique(text_of[: len(keys)][valid] * bound + keys[valid], return_counts=True)
        uniq, counts = grams
        split = int(np.searchsorted(uniq, hyps * bound))
        hyp_keys, hyp_counts = uniq[:split], counts[:split]
        ref_text = uniq[split:] // bound - hyps
        wanted = ref_pair[ref_text] * bound + uniq[split:] % bound
        at = np.minimum(np.searchsorted(hyp_keys, wanted), max(split - 1, 0))
        found = hyp_keys[at] == wanted if split else np.zeros(len(wanted), dtype=bool)
        hits = np.where(found, np.minimum(hyp_counts[at] if split else 0, counts[split:]), 0)
        n_hyp = np.maximum(lengths[:hyps] - n + 1, 0)[ref_pair]
        n_ref = np.maximum(lengths[hyps:] - n + 1, 0)
        out[:, 3 * (n - 1)] = np.where(n_ref > 0, n_hyp, 0)
        out[:, 3 * (n - 1) + 1] = n_ref
        out[:, 3 * (n - 1) + 2] = np.bincount(ref_text, weights=hits, minlength=refs)
    return out


def _chars(texts: list[str]) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
    lengths = np.array([len(t) for t in texts], dtype=np.int64)
    # surrogatepass: JSON can carry a lone surrogate ("\ud800"), which sacrebleu scores as a
    # character like any other.
    whole = "".join(texts).encode("utf-32-le", "surrogatepass")
    return np.frombuffer(whole, dtype="<u4").astype(np.int64), lengths


def _tokens(texts: list[str]) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
    vocab: dict[str, int] = {}
    words = [_words(t) for t in texts]
    ids = [vocab.setdefault(w, len(vocab)) for ws in words for w in ws]
    return np.array(ids, dtype=np.int64), np.array([len(ws) for ws in words], dtype=np.int64)


def _batch_rows(
    hypotheses: Sequence[str], references: Sequence[Sequence[str]], char_order: int,
    word_order: int, beta: int, lowercase: bool, whitespace: bool, eps_smoothing: bool,
) -> NDArray[np.int64]:  # fmt: skip
    hyps = [h.lower() for h in hypotheses] if lowercase else list(hypotheses)
    refs = [r.lower() if lowercase else r for rs in references for r in rs]
    ref_pair = np.repeat(np.arange(len(hyps)), [len(rs) for rs in references])
    parts = []
    if char_order:
        texts = hyps + refs if whitespace else ["".join(t.split()) for t in hyps + refs]
        parts.append(_matches(*_chars(texts), len(hyps), ref_pair, char_order))
    if word_order:
        parts.append(_matches(*_tokens(hyps + refs), len(hyps), ref_pair, word_order))
    stats = np.concatenate(parts, axis=1)
    # The first reference with the best sentence chrF, as sacrebleu's strict ">" keeps it.
    f = f_scores(stats, char_order + word_order, beta, eps_smoothing)
    best = np.full(len(hyps), -1.0)
    np.maximum.at(best, ref_pair, f)
    top = np.flatnonzero(f == best[ref_pair])
    _, first = np.unique(ref_pair[top], return_index=True)
    return stats[top[first]]


def chrf_rows(
    hypotheses: Sequence[str],
    references: Sequence[Sequence[str]],
    *,
    char_order: int,
    word_order: int,
    beta: int,
    lowercase: bool,
    whitespace: bool,
    eps_smoothing: bool,
) -> NDArray[np.int64]:
    """Per pair, the ``[hyp, ref, match]`` counts per order of the reference with the best
    sentence chrF (the first of equals), as sacrebleu's statistics. Every pair needs at
    least one reference."""
    width = 3 * (char_order + word_order)
    parts = [np.zeros((0, width), dtype=np.int64)]
    for start in range(0, len(hypotheses), CHRF_BATCH):
        end = start + CHRF_BATCH
        parts.append(
            _batch_rows(
                hypotheses[start:end],
                references[start:end],
                char_order,
                word_order,
                beta,
                lowercase,
                whitespace,
                eps_smoothing,
            )
        )
    return np.concatenate(parts)
