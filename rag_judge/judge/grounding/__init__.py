"""Grounding, the judge's side: the requests' schemas and the models their replies parse into
(``claims.py``), and the rounds a chunk is asked in (``rounds.py``: the claim lists, the claim
verdicts, ALCE's questions on cited sentences). Scoring what came back is
:mod:`rag_judge.evaluators.grounding`."""
