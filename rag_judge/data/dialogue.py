"""Drive a conversational target through whole conversations: replay a dataset's user turns,
or let a simulated user write them from a goal. docs/conversations.md, "Driving a
conversation", says what each mode does and how a conversation stops.

A conversational target is called once per turn with the conversation so far: a list of
``{"role": "user" | "assistant", "content": str}`` messages ending with the user's, or with
``input: turns`` a list of ``Turn`` models ending with a turn that holds only the question. It
returns the next assistant turn: an answer string, or any one-turn shape a target may return
(``rag_judge.data.target``), or a ``Turn``.

The simulated user is any async callable from a ``UserBrief`` to a ``UserTurn``; the judge layer
builds one from a judge model (``rag_judge.judge.simulated_user``).
"""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import Awaitable, Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from rag_judge import _progress as progress
from rag_judge._async import run_sync
from rag_judge.data.conversation import Driven, Stop, Turn
from rag_judge.data.sample import SAMPLE_EXPECTED, Sample
from rag_judge.data.target import (
    Target,
    TargetRun,
    caller,
    check_settings,
    checked_answer,
    failed_sample,
    filled_sample,
    gathered,
    is_async,
    unpack,
    validated_sample,
)
from rag_judge.errors import ConfigError
from rag_judge.messages import input_problems

__all__ = ["Drive", "SimulatedUser", "UserBrief", "UserTurn", "drive_target", "drive_target_sync"]

Mode = Literal["replay", "simulate"]
_GOLD = ("references", "relevance", "qrels", "metadata")
_TURN_FIELDS = ("question", "answer", "contexts", "references", "relevance", "qrels")
# What a turn's fields take, for the errors of a turn a target returned.
_TURN_EXPECTED = {
    k.removeprefix("turns[]."): v for k, v in SAMPLE_EXPECTED.items() if k.startswith("turns[].")
}


class Drive(BaseModel):
    """How a conversational target is driven: ``mode`` (``replay`` the dataset's user turns,
    or ``simulate`` the user), at most ``max_turns`` turns per conversation, ``stop`` (a
    regular expression: a conversation ends after an answer it is found in), and what the
    target is called with (``input``: ``messages`` or ``turns``)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    mode: Mode = "replay"
    max_turns: int = Field(default=6, ge=1)
    stop: str | None = None
    input: Literal["messages", "turns"] = "messages"

    @field_validator("stop")
    @classmethod
    def _regex(cls, value: str | None) -> str | None:
        if value is not None:
            try:
                re.compile(value)
            except re.error as exc:
                raise ValueError(f"not a regular expression ({exc}): {value!r}") from None
        return value

    def pattern(self) -> re.Pattern[str] | None:
        return None if self.stop is None else re.compile(self.stop)


@dataclass(frozen=True)
class UserBrief:
    """What the simulated user is given: the goal, who it is (persona) and the situation
    (scenario) when the sample says, and the conversation so far as (role, content) pairs."""

    goal: str
    persona: str | None
    scenario: str | None
    messages: tuple[tuple[str, str], ...]


@dataclass(frozen=True)
class UserTurn:
    """What the simulated user said: its next message, or that it is done (the goal reached,
    or given up on)."""

    message: str | None
    done: bool = False


SimulatedUser = Callable[[UserBrief], Awaitable[UserTurn]]


class _TurnFailed(Exception):
    """A turn's call failed: the message recorded against the sample, and the question the
    turn was asked (None when there was none to ask)."""

    def __init__(self, message: str, question: str | None) -> None:
        super().__init__(message)
        self.question = question


async def drive_target(
    target: Target,
    samples: Sequence[Sample],
    drive: Drive,
    *,
    user: SimulatedUser | None = None,
    concurrency: int = 4,
    timeout: float | None = None,
) -> TargetRun:
    """Drive ``target`` through one conversation per sample, at most ``concurrency``
    conversations at a time (each one turn after another). ``timeout`` bounds each target call.
    A conversation's latency is its target calls' summed. Failures never raise: each is
    recorded, with the turns run until then."""
    check_settings(concurrency, timeout)
    if drive.mode == "simulate" and user is None:
        raise ConfigError("conversation mode 'simulate' needs a simulated user")
    limit = asyncio.Semaphore(concurrency)
    executor = None if is_async(target) else ThreadPoolExecutor(concurrency, "rag-judge-target")
    call = caller(target, executor)
    counter = progress.task("target", len(samples), "conversations")

    async def one(sample: Sample) -> tuple[Sample, float | None, str | None]:
        async with limit:
            result = await _Conversation(sample, drive, call, user, timeout).run()
        counter.update(done=1, failed=result[2] is not None)
        return result

    return await gathered(one, samples, counter, executor)


def drive_target_sync(
    target: Target,
    samples: Sequence[Sample],
    drive: Drive,
    *,
    user: SimulatedUser | None = None,
    concurrency: int = 4,
    timeout: float | None = None,
) -> TargetRun:
    """:func:`drive_target` from synchronous code."""
    return run_sync(
        drive_target(target, samples, drive, user=user, concurrency=concurrency, timeout=timeout)
    )


class _Conversation:
    """One conversation being driven: the turns run so far and the messages the target saw."""

    def __init__(
        self,
        sample: Sample,
        drive: Drive,
        call: Callable[[Any], Awaitable[Any]],
        user: SimulatedUser | None,
        timeout: float | None,
    ) -> None:
        self.sample, self.drive, self.call, self.user = sample, drive, call, user
        self.timeout = timeout
        self.turns: list[Turn] = []
        self.spent = 0.0  # seconds in target calls

    async def run(self) -> tuple[Sample, float | None, str | None]:
        sample, drive = self.sample, self.drive
        if drive.mode == "replay" and not sample.is_conversation():
            return await self._single()
        if drive.mode == "simulate" and sample.goal is None:
            return self._failed(), None, "the sample has no goal: a simulated user needs one"
        # The dataset's turns: all of them replayed; when simulating, the first one's question
        # (or the sample's) opens the conversation.
        gold = list(sample.conversation_turns())
        if drive.mode == "simulate":
            gold = gold[:1] if gold[0].question is not None else []
        stopped: Stop = "max_turns"
        error: str | None = None
        pattern = drive.pattern()
        for i in range(drive.max_turns):
            if drive.mode == "replay" and i == len(gold):
                stopped = "dataset_end"
                break
            base = {k: getattr(gold[i], k) for k in _GOLD} if i < len(gold) else {}
            try:
                question = await self._question(i, gold)
                if question is None:
                    stopped = "user_done"
                    break
                answered = _turn(await self._call(i, question), question, i)
            except _TurnFailed as exc:
                error, stopped = str(exc), "error"
                if exc.question is not None:  # asked, not answered: the turn is kept
                    self.turns.append(Turn(question=exc.question, **base))
                break
            self.turns.append(answered.model_copy(update=base))
            if pattern is not None and pattern.search(answered.answer or ""):
                stopped = "stop_pattern"
                break
        else:
            if drive.mode == "replay" and len(gold) == drive.max_turns:
                stopped = "dataset_end"
        return self._result(stopped, error)

    async def _question(self, i: int, gold: list[Turn]) -> str | None:
        """The user's message of turn ``i``; None when the simulated user is done."""
        if i < len(gold):
            if gold[i].question is None:
                raise _TurnFailed(f"turn {i}: the dataset's turn has no question", None)
            return gold[i].question
        if self.user is None:  # pragma: no cover - drive_target checks it
            raise ConfigError("no simulated user")
        meta = self.sample.metadata
        brief = UserBrief(
            goal=self.sample.goal or "",
            persona=_text(meta.get("persona", meta.get("user_description"))),
            scenario=_text(meta.get("scenario")),
            messages=tuple(m for t in self.turns for m in _pair(t)),
        )
        try:
            said = await self.user(brief)
        except Exception as exc:  # a judge model may fail in any way
            message = f"turn {i}: the simulated user failed: {type(exc).__name__}: {exc}"
            raise _TurnFailed(message, None) from None
        if said.done and i == 0:
            raise _TurnFailed("turn 0: the simulated user wrote no first message", None)
        if said.done:
            return None
        if not said.message:
            raise _TurnFailed(f"turn {i}: the simulated user wrote an empty message", None)
        return said.message

    async def _call(self, i: int, question: str) -> Any:
        """What the target returned for turn ``i``, asked ``question``; its time is counted."""
        start = time.perf_counter()
        try:
            value = await asyncio.wait_for(self.call(self._input(question)), self.timeout)
        except asyncio.TimeoutError:
            raise _TurnFailed(f"turn {i}: timed out after {self.timeout:g} s", question) from None
        except Exception as exc:  # the system under test may raise anything
            raise _TurnFailed(f"turn {i}: {type(exc).__name__}: {exc}", question) from None
        self.spent += time.perf_counter() - start
        return value

    def _input(self, question: str) -> Any:
        if self.drive.input == "turns":
            return [*self.turns, Turn(question=question)]
        pairs = [*(m for t in self.turns for m in _pair(t)), ("user", question)]
        return [{"role": role, "content": content} for role, content in pairs]

    async def _single(self) -> tuple[Sample, float | None, str | None]:
        """A single-turn sample replayed: one call. The sample stays single-turn unless the
        target returns steps, as with a plain target."""
        sample = self.sample
        if sample.question is None:
            return self._failed(), None, "the sample has no question"
        try:
            value = await self._call(0, sample.question)
            if isinstance(value, str):
                value = {"answer": value}
            if unpack(value).turns is not None:
                raise ValueError("a conversational target returns one turn per call, not 'turns'")
            filled = filled_sample(sample, value)
        except _TurnFailed as exc:
            return self._failed(), None, str(exc)
        except ValueError as exc:
            return self._failed(), None, f"turn 0: {exc}"
        answer = filled.conversation_turns()[-1].answer or ""
        pattern = self.drive.pattern()
        stopped: Stop = "stop_pattern" if pattern and pattern.search(answer) else "dataset_end"
        return filled.model_copy(update={"driven": self._driven(stopped, 1)}), self.spent, None

    def _failed(self) -> Sample:
        """The sample when its conversation failed before any turn was answered."""
        update = {"driven": self._driven("error", 0)}
        return failed_sample(self.sample).model_copy(update=update)

    def _driven(self, stopped: Stop, answered: int) -> Driven:
        return Driven(
            mode=self.drive.mode, turns=answered, max_turns=self.drive.max_turns, stopped=stopped
        )

    def _result(self, stopped: Stop, error: str | None) -> tuple[Sample, float | None, str | None]:
        """The sample with the turns run (none when the first message never came)."""
        answered = sum(t.answer is not None for t in self.turns)
        data = self.sample.model_dump(exclude={*_TURN_FIELDS, "turns"})
        data["turns"] = [t.model_dump() for t in self.turns] or None
        data["driven"] = self._driven(stopped, answered).model_dump()
        # The dataset's expected tools of turns that were never run go with those turns.
        expected = data.get("expected_tools")
        if expected is not None:
            count = max(len(self.turns), 1)
            data["expected_tools"] = [e for e in expected if e.get("turn", 0) < count]
        return validated_sample(data), (None if error else self.spent), error


def _pair(turn: Turn) -> list[tuple[str, str]]:
    out = [("user", turn.question or "")]
    return [*out, ("assistant", turn.answer)] if turn.answer is not None else out


def _text(value: Any) -> str | None:
    return None if value is None else str(value)


def _turn(value: Any, question: str, i: int) -> Turn:
    """The turn ``i`` a conversational target returned; a wrong shape fails the turn."""
    try:
        return _read_turn(value, question)
    except ValueError as exc:
        raise _TurnFailed(f"turn {i}: {exc}", question) from None


def _read_turn(value: Any, question: str) -> Turn:
    if isinstance(value, str):
        return Turn(question=question, answer=value)
    if isinstance(value, Turn):
        return Turn(question=question, steps=value.steps, answer=value.answer)
    out = unpack(value)
    if out.turns is not None:
        raise ValueError("a conversational target returns one turn per call, not 'turns'")
    answer = checked_answer(out.answer)
    steps: Any = out.steps
    if steps is None:
        steps = [] if out.contexts is None else [{"contexts": out.contexts}]
    try:
        return Turn.model_validate({"question": question, "steps": steps, "answer": answer})
    except ValidationError as exc:
        problems = "; ".join(
            f"'{p.field}': {p.message}" if p.field else p.message
            for p in input_problems(exc, Turn, expected=_TURN_EXPECTED)
        )
        raise ValueError(f"target returned an invalid turn: {problems}") from None
