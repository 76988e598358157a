"""Follow one judge client through rag-judge: every function call that holds it (as an argument
or a local), as a sequence of files, from ``JudgeEvaluator.evaluate`` to the first call that
reaches ``judge/asking.py``. Prints the files in order, how many there are, and how many times
the path returns to a file it had left (issue 28's measure: at most 4 files, no return).

    python scripts/client_path.py
"""

from __future__ import annotations

import sys
from pathlib import Path
from types import FrameType
from typing import Any

import rag_judge
from rag_judge.data.sample import Context, Sample
from rag_judge.evaluators import JudgeEvaluator
from rag_judge.llm.providers.stub import StubClient, fixed

PACKAGE = Path(rag_judge.__file__).resolve().parent


def main() -> None:
    follow(JudgeEvaluator(rubrics=["fluency"], cache=None), StubClient())
    jury = JudgeEvaluator(
        rubrics=["fluency"],
        cache=None,
        judges=[{"provider": "stub"}, {"provider": "stub", "stub": "fixed"}],
    )
    follow(jury, [StubClient(), StubClient(fixed(4))])  # fmt: skip


def follow(judge: JudgeEvaluator, client: Any) -> None:
    """Print the path of ``client`` (one, or a jury's list) through ``judge.evaluate``."""
    samples = [Sample(id="q", question="q?", answer="a", contexts=[Context(text="a")],
                      references=["a"])]  # fmt: skip
    stays: list[str] = []

    def profile(frame: FrameType, event: str, arg: Any) -> None:
        if event != "call" or (stays and stays[-1].endswith("judge/asking.py")):
            return
        path = Path(frame.f_code.co_filename).resolve()
        if PACKAGE not in path.parents:
            return
        # The path ends where the asking starts (it gets the engines' openers, not the client).
        if path.name == "asking.py" or _holds(frame, client):
            where = str(path.relative_to(PACKAGE.parent))
            if "-v" in sys.argv:
                print("  ", where, frame.f_code.co_name)
            if not stays or stays[-1] != where:
                stays.append(where)

    sys.setprofile(profile)
    try:
        judge.evaluate(samples, client=client)
    finally:
        sys.setprofile(None)
    seen: list[str] = []
    returns = 0
    for where in stays:
        returns += where in seen
        seen.append(where)
    print("\n".join(stays))
    kind = "a jury" if judge.judges else "one judge"
    print(
        f"{kind}: {len(stays)} stays in {len(set(stays))} files, {returns} returns to a file left"
    )


def _holds(frame: FrameType, client: Any) -> bool:
    """Whether a local is the client (one of a jury's) or holds it directly: a session
    (``.client``), a list of clients or of sessions."""
    targets = {id(c) for c in (client if isinstance(client, list) else [client])}

    def has(value: object, depth: int = 0) -> bool:
        if id(value) in targets or id(getattr(value, "client", None)) in targets:
            return True
        if depth < 1 and isinstance(value, list | tuple):
            return any(has(v, depth + 1) for v in value)
        return False

    return any(has(v) for v in frame.f_locals.values())


if __name__ == "__main__":
    main()
