"""``rag-judge synth``: test sets from a corpus, with graded relevance over a pool of chunks.

The corpus is read and chunked with offsets (``corpus.py``), seed chunks are sampled, the
judge writes questions of several kinds and grades a pool of candidate chunks per question
(BM25 neighbours: ``pool.py``) on UMBRELA's 0-3 scale (``asks.py``), filters reject weak
items (``filters.py``), and the result is a rag-judge dataset with span-level ``qrels`` and a
manifest (``generate.py``). docs/synth.md has the rules.
"""
