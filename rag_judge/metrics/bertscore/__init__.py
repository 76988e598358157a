"""BERTScore below the evaluator: ``kernel`` (the math, pure NumPy), ``models`` (offline model
folders and a store that loads each once), ``encoder`` (padding-free encoding, the in-process
LRU, the runtime a process keeps), ``cache`` (the SQLite disk cache), ``baseline`` (bert-score's
rescaling files). See docs/bertscore.md."""
