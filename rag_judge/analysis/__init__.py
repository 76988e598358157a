"""Statistics over Reports: paired comparison (``compare``), CI gates (``gates``) and judge
calibration against human labels (``calibration``). Pure computation on ``report.model``;
the command line (``rag_judge.cli``) reads the files and renders the typed results."""
