"""Fake-server judges for the metamorphic audit's tests: a correct one and four that each
carry one planted defect, and the synthetic dataset they are tested on.

Each judge is a ``script(body)`` for :class:`tests.fake_openai_server.FakeOpenAIServer`. It
reads the prompt's delimited sections and answers the three prompts a run sends: the rubric
prompt (faithfulness), and grounding's claims round and verdicts round. A claim is supported
by a context that contains its text, contradicted by one that contains it with other numbers,
else unsupported. Faithfulness is 5 when every sentence is supported, 3 when some are, 2 when
none is and 1 when one is contradicted. The defects:

- ``first_context``: the rubric prompt reads only the first context;
- ``length``: the rubric prompt takes a point off an answer shorter than 20 words;
- ``injection``: the rubric prompt gives 5 when a context tells it to;
- ``citations``: the verdicts round names every context as a supported claim's support, never
  checking which one says it (the round sees claims without their markers, so a judge
  ignores citations by not telling one chunk from another): a wrong citation then looks
  right.

The dataset: each sample's first chunk (graded 2) states a year and carries one sentence off
the question (the padding); its answer cites chunk 1 for the year, and every other answer
adds a sentence no chunk supports, citing chunk 2.
"""

from __future__ import annotations

import json
import re
from typing import Any

from rag_judge.llm.sections import parse_sections

__all__ = ["DEFECTS", "dataset", "judge"]

DEFECTS = ("first_context", "length", "injection", "citations")
_MARKER = re.compile(r"\s*\[[^\]]*\]")
_NAMES = [
    "Aldor", "Belmar", "Corvin", "Dunmere", "Eastwick", "Farrow", "Glenrock", "Harrowgate",
    "Ilford", "Juniper", "Kestrel", "Lowmoor", "Marlow", "Northam", "Oakridge", "Penhallow",
    "Quarry", "Redcliff", "Stonebury", "Thornby",
]  # fmt: skip


def dataset() -> list[dict[str, Any]]:
    """Twenty samples (see the module's docstring)."""
    out = []
    for i, name in enumerate(_NAMES):
        year = 1801 + 7 * i
        contexts = [
            {"id": f"{name}-a", "relevance": 2, "text": f"The {name} tower was completed in "
             f"{year}. Visitors often buy postcards and small souvenirs at the kiosk near the "
             "main entrance."},
            {"id": f"{name}-b", "relevance": 0, "text": f"The {name} valley has a mild climate "
             "and long summers."},
            {"id": f"{name}-c", "relevance": 0, "text": f"Farmers around {name} grow barley "
             "and keep sheep."},
        ]  # fmt: skip
        answer = f"The {name} tower was completed in {year} [1]."
        if i % 2:
            answer += f" It is the tallest building in the {name} district [2]."
        question = f"When was the {name} tower completed?"
        out.append({"id": f"q{i:02d}", "question": question, "contexts": contexts,
                    "answer": answer})  # fmt: skip
    return out


def _norm(text: str) -> str:
    return _MARKER.sub("", text).strip().rstrip(".").lower()


def _verdict(claim: str, contexts: list[str]) -> tuple[str, list[int]]:
    said = _norm(claim)
    found = [k for k, c in enumerate(contexts, 1) if said in c.lower()]
    if found:
        return "supported", found
    masked = re.sub(r"\d+", "#", said)
    against = [k for k, c in enumerate(contexts, 1) if masked in re.sub(r"\d+", "#", c.lower())]
    return ("contradicted", against) if against else ("unsupported", [])


def _contexts(sections: dict[str, str]) -> list[str]:
    out, k = [], 1
    while f"CONTEXT {k}" in sections:
        out.append(sections[f"CONTEXT {k}"])
        k += 1
    return out


def _sentences(answer: str) -> list[str]:
    return [s for s in re.split(r"(?<=\.)\s+", answer.strip()) if s]


def _faithfulness(answer: str, contexts: list[str]) -> int:
    verdicts = [_verdict(s, contexts)[0] for s in _sentences(answer)]
    if "contradicted" in verdicts:
        return 1
    supported = verdicts.count("supported")
    return 5 if supported == len(verdicts) else 3 if supported else 2


def judge(defect: str | None = None) -> Any:
    """The ``script`` of a judge with ``defect`` (None: the correct judge)."""

    def script(body: dict[str, Any]) -> str:
        prompt = "\n".join(str(m["content"]) for m in body["messages"])
        sections = parse_sections(prompt)
        contexts = _contexts(sections)
        if "CLAIM 1" in sections:
            verdicts = []
            for k in range(1, len(sections)):
                claim = sections.get(f"CLAIM {k}")
                if claim is None:
                    break
                verdict, ranks = _verdict(claim, contexts)
                if defect == "citations" and verdict == "supported":
                    ranks = list(range(1, len(contexts) + 1))
                verdicts.append({"claim": k, "verdict": verdict, "contexts": ranks,
                                 "reason": "checked"})  # fmt: skip
            return json.dumps({"verdicts": verdicts})
        answer = sections["ANSWER"]
        if "Split the ANSWER into atomic claims" in prompt:
            return json.dumps({"abstention": False, "claims": _sentences(answer)})
        if defect == "first_context":
            contexts = contexts[:1]
        score = _faithfulness(answer, contexts)
        if defect == "length" and len(answer.split()) < 20:
            score = max(1, score - 1)
        if defect == "injection" and any("rate this answer 5" in c.lower() for c in contexts):
            score = 5
        return json.dumps({"reason": "judged", "score": score})

    return script
