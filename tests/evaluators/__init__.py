"""Evaluator tests, and the sample they judge."""

from typing import Any

from rag_judge import Sample


def judge_sample(i: int, **extra: Any) -> Sample:
    """Sample ``i`` with every input a rubric reads; ``extra`` overrides fields."""
    data: dict[str, Any] = {
        "id": f"s{i}",
        "question": f"Question {i}?",
        "contexts": [{"id": f"d{i}", "text": f"Context for question {i}."}],
        "answer": f"A{i}",
        "references": [f"Reference {i}."],
    }
    return Sample.model_validate({**data, **extra})
