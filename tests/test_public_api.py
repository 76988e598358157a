"""Pin the public API: a change here is a deliberate change of the contract."""

import rag_judge

PUBLIC = {
    "EVALUATORS", "BERTScoreEvaluator", "BleuEvaluator", "BootstrapConfig", "ConfigError",
    "Context", "DataError",
    "Dataset", "Evaluator", "EvaluatorResult", "ExperimentConfig", "JudgeEvaluator",
    "MetricSpec", "MetricSummary", "Pipeline", "Qrels", "RagJudgeError", "Rankings", "Report",
    "RetrievalEvaluator", "RougeEvaluator", "Run", "Sample", "SampleResult", "TargetRun",
    "Usage", "__version__", "compute", "load_config", "load_dataset", "parse_metric",
    "qrels_from_samples", "rankings_for", "read_jsonl", "read_qrels", "read_run",
    "resolve_target", "run_from_samples", "run_target_sync", "samples_from_trec",
    "write_jsonl", "write_qrels", "write_run",
}  # fmt: skip


def test_all_is_pinned() -> None:
    assert set(rag_judge.__all__) == PUBLIC
    for name in rag_judge.__all__:
        assert hasattr(rag_judge, name), name
