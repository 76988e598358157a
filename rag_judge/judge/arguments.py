"""Whether a tool call's arguments are equivalent to an expected call's, asked of a judge (the
tools evaluator's ``args: judge``).

One request per distinct :class:`ArgsPair`: a tool, the agent's arguments and the expected
ones, both as canonical JSON. The prompt (``_tool_arguments.j2``) shows the three in delimited
sections. The reply is ``{"reason": "...", "equivalent": true|false}`` (an
:class:`ArgumentVerdict`). A reply that will not read is re-asked ``reask`` times; then the
pair holds an ``Unscored`` with the reason. A call that failed for good holds its
``LLMError``. The evaluator turns the verdicts into argument matchers; the rules are in
docs/conversations.md ("Judged arguments").
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError

from rag_judge.judge.asking import ask_all
from rag_judge.judge.prompts import PromptRenderer
from rag_judge.judge.reply_json import FENCE, braced, lenient_loads
from rag_judge.judge.rubrics import Rubric
from rag_judge.judge.settings import JudgeSession
from rag_judge.judge.verdicts import Unscored
from rag_judge.llm.base import Completion, CompletionRequest, LLMError
from rag_judge.llm.engine import JudgeEngine
from rag_judge.metrics.trajectory import canonical_json
from rag_judge.report.model import Failure, FailureKind

__all__ = [
    "ARGUMENTS_RUBRIC",
    "ARGUMENTS_SCHEMA",
    "ARGUMENTS_SHAPE",
    "ArgsPair",
    "ArgumentVerdict",
    "ArgumentsAsk",
    "Found",
    "read_argument_verdict",
    "verdict_failure",
]

# The prompt as a rubric, so that the renderer compiles and hashes it like any other. Its
# inputs are not read: the template takes its own variables.
ARGUMENTS_RUBRIC = Rubric(name="tool_arguments", inputs=("question",),
                          template="_tool_arguments.j2")  # fmt: skip
ARGUMENTS_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"reason": {"type": "string"}, "equivalent": {"type": "boolean"}},
    "required": ["reason", "equivalent"],
    "additionalProperties": False,
}
ARGUMENTS_SHAPE = '{"reason": "<one sentence>", "equivalent": <true|false>}'


@dataclass(frozen=True, order=True)
class ArgsPair:
    """A question for the judge: are ``output``'s arguments to ``tool`` equivalent to
    ``reference``'s? Both are canonical JSON texts, so equal arguments make one pair."""

    tool: str
    output: str
    reference: str

    @classmethod
    def of(cls, tool: str, output: Mapping[str, Any], reference: Mapping[str, Any]) -> ArgsPair:
        return cls(tool, canonical_json(output), canonical_json(reference))

    @property
    def equal(self) -> bool:
        """Equal as JSON: they match without asking."""
        return self.output == self.reference


class ArgumentVerdict(BaseModel):
    """The judge's answer for one pair."""

    model_config = ConfigDict(frozen=True)

    equivalent: bool
    reason: str = ""


# What came of one pair: the verdict, a reply that would not read, or a failed call.
Found = ArgumentVerdict | Unscored | LLMError


def read_argument_verdict(completion: Completion) -> ArgumentVerdict | Unscored:
    """The verdict of a reply, or Unscored saying what is wrong with it. The JSON is read as
    leniently as a rubric verdict (fenced code, text around it, single quotes)."""
    text = completion.text
    if not text.strip():
        return Unscored(reason="empty reply", raw=text)
    chunks = [text, *(m.group(1) for m in FENCE.finditer(text)), *(c for c, _ in braced(text))]
    found = next(
        (o for o in map(lenient_loads, chunks) if isinstance(o, dict) and "equivalent" in o),
        None,
    )
    if found is None:
        return Unscored(reason="no JSON object with 'equivalent' in the reply", raw=text)
    if not isinstance(found["equivalent"], bool):
        # Only JSON true or false: "yes", 1 or "maybe" would be a verdict we guessed.
        got = repr(found["equivalent"])
        return Unscored(reason=f"'equivalent' must be true or false, not {got}", raw=text)
    try:
        return ArgumentVerdict.model_validate(found)
    except ValidationError as exc:
        return Unscored(reason=f"verdict: {exc.errors()[0]['msg']}", raw=text)


def verdict_failure(found: Unscored | LLMError | None, tool: str) -> Failure:
    """Why a pair of ``tool``'s calls has no verdict, as a metric's failure: ``unscored`` for
    a reply that would not read, an error for a call that failed or a pair never asked."""
    what = f"arguments of {tool!r}"
    if isinstance(found, Unscored):
        return Failure(kind=FailureKind.UNSCORED, message=f"{what}: {found.reason}")
    if found is None:
        return Failure(message=f"{what}: the judge was not asked about this pair")
    return Failure(message=f"{what}: judge call failed: {found}")


def arguments_renderer() -> PromptRenderer:
    """The arguments prompt, compiled."""
    renderer = PromptRenderer()
    renderer.load(ARGUMENTS_RUBRIC)
    return renderer


class ArgumentsAsk:
    """The argument questions of one run, over ``session``'s judge."""

    def __init__(self, session: JudgeSession) -> None:
        self.session = session
        self.renderer = arguments_renderer()

    def request(self, pair: ArgsPair) -> CompletionRequest:
        variables = {"tool": pair.tool, "called": pair.output, "expected": pair.reference}
        messages = self.renderer.render(ARGUMENTS_RUBRIC, variables)
        return self.session.judge.request(messages, ARGUMENTS_SCHEMA)

    async def ask(self, engine: JudgeEngine, pairs: Sequence[ArgsPair]) -> dict[ArgsPair, Found]:
        """Every pair's verdict over ``engine`` (its scheduler, rate limit and cache)."""
        requests = [self.request(p) for p in pairs]
        reask = self.session.judge.reask
        outcomes = await ask_all(engine, requests, read_argument_verdict, shape=ARGUMENTS_SHAPE,
                                 reask=reask, label="tool arguments")  # fmt: skip
        out: dict[ArgsPair, Found] = {}
        for pair, outcome in zip(pairs, outcomes, strict=True):
            result = outcome.result
            # ask_all gives every request a result; None would be a bug, read as no reply.
            out[pair] = result if result is not None else Unscored(reason="no reply", raw="")
        return out

    def options(self) -> dict[str, str]:
        """The signature options of the judged metrics: the judge, the prompt's hash and the
        judge's sampling, as other judge metrics sign them."""
        prompt = self.renderer.template_hash(ARGUMENTS_RUBRIC)
        return {"judge": self.session.name.text, "prompt": prompt, **self.session.judge.sampling()}
