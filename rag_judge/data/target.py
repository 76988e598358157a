"""Run the RAG system under test: call a user's function on each question, record answers,
retrieved contexts, latency and failures.

A target is any callable taking the question string, sync or async, named in a config as
``package.module:function`` or ``path/to/file.py:function``. It returns a dict
``{"answer": str, "contexts": [str | {"id", "text", "score"}]}``, a tuple ``(answer, contexts)``
or an object with ``.answer`` and ``.contexts``.

An agent that retrieves several times or calls tools returns its steps instead of contexts:
``{"answer": str, "steps": [{"query", "contexts"} | {"tool", "arguments", "result"}]}`` (or an
object with ``.answer`` and ``.steps``), one turn. A conversation returns
``{"turns": [{"question", "steps", "answer"}, ...]}`` (or an object with ``.turns``; turns and
steps may be ``rag_judge.data.conversation`` models). Either makes the sample a conversation
(``Sample.turns``): the first turn's question is the sample's when the target leaves it out, and
the sample's references, relevance and qrels go to that turn unless it brings its own.

A conversational target, called a turn at a time with the conversation so far, is driven by
``rag_judge.data.dialogue`` (``conversation:`` in a config).
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import importlib
import importlib.util
import inspect
import sys
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from rag_judge import _progress as progress
from rag_judge._async import run_sync
from rag_judge.data.conversation import Turn
from rag_judge.data.frameworks import framework_target, split_framework
from rag_judge.data.sample import SAMPLE_EXPECTED, Context, Sample
from rag_judge.errors import ConfigError
from rag_judge.messages import input_problems

__all__ = [
    "TargetRun",
    "caller",
    "check_settings",
    "checked_answer",
    "failed_sample",
    "filled_sample",
    "gathered",
    "is_async",
    "resolve_target",
    "run_target",
    "run_target_sync",
    "unpack",
    "validated_sample",
]

Target = Callable[[str], Any]
_SHAPES = (
    "a dict {'answer': str, 'contexts': [...]}, a tuple (answer, contexts) "
    "or an object with .answer and .contexts (or .steps instead of .contexts, or .turns)"
)
_DICT_KEYS = ("answer", "contexts", "steps", "turns")
# The fields a conversation keeps in its turns; the first turn takes the sample's gold data.
_GOLD = ("references", "relevance", "qrels")


@dataclass(frozen=True)
class _Output:
    """What a target returned: an answer with contexts or steps, or whole turns."""

    answer: Any = None
    contexts: Any = None
    steps: Any = None
    turns: Any = None


@dataclass(frozen=True)
class TargetRun:
    """Per input sample, in input order: the sample with the target's answer and contexts,
    the call's latency in seconds (None when it failed) and its failure (None when it worked).
    A failed sample has no answer and no contexts."""

    samples: list[Sample]
    latency: list[float | None]
    errors: list[str | None]

    @property
    def failures(self) -> int:
        return sum(e is not None for e in self.errors)


def resolve_target(spec: str, *, base_dir: str | Path | None = None) -> Target:
    """The callable named by ``package.module:function`` or ``path/to/file.py:function``
    (a file path is relative to ``base_dir``, default the working folder). The attribute may
    be dotted: ``module:obj.method``. A ``langchain:`` or ``llamaindex:`` prefix names a
    framework's object instead (data/frameworks.py)."""
    framework, named = split_framework(spec)
    if framework:
        return framework_target(framework, _named_object(named, spec, base_dir), spec)
    obj = _named_object(spec, spec, base_dir)
    if not callable(obj):
        attr = spec.rpartition(":")[2]
        raise ConfigError(f"target {spec!r}: {attr} is a {type(obj).__name__}, not callable")
    return obj  # type: ignore[no-any-return]


def _named_object(name: str, spec: str, base_dir: str | Path | None) -> Any:
    module_name, sep, attr = name.rpartition(":")
    if not sep or not module_name or not attr:
        raise ConfigError(
            f"target {spec!r}: expected 'package.module:function' or 'path/to/file.py:function'"
        )
    if module_name.endswith(".py"):
        module = _import_file(spec, Path(base_dir or ".") / module_name)
    else:
        module = _import_module(spec, module_name)
    obj: Any = module
    for part in attr.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            raise ConfigError(f"target {spec!r}: {module_name} has no attribute {attr!r}") from None
    return obj


def _import_module(spec: str, name: str) -> Any:
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as exc:
        if exc.name is not None and (name == exc.name or name.startswith(exc.name + ".")):
            raise ConfigError(
                f"target {spec!r}: no module named {exc.name!r} (is it installed or on "
                f"PYTHONPATH? a file works too: 'path/to/file.py:function')"
            ) from None
        raise ConfigError(f"target {spec!r}: importing {name} failed: {exc}") from exc
    except Exception as exc:
        raise ConfigError(
            f"target {spec!r}: importing {name} failed: {type(exc).__name__}: {exc}"
        ) from exc


def _import_file(spec: str, path: Path) -> Any:
    path = path.resolve()
    if not path.is_file():
        raise ConfigError(f"target {spec!r}: file {path} not found")
    name = f"rag_judge_target_{path.stem}_{abs(hash(str(path))):x}"
    if name in sys.modules:
        return sys.modules[name]
    loader_spec = importlib.util.spec_from_file_location(name, path)
    if loader_spec is None or loader_spec.loader is None:
        raise ConfigError(f"target {spec!r}: cannot load {path} as a Python module")
    module = importlib.util.module_from_spec(loader_spec)
    sys.modules[name] = module  # dataclasses and pickling look the module up by name
    try:
        loader_spec.loader.exec_module(module)
    except Exception as exc:
        del sys.modules[name]
        raise ConfigError(
            f"target {spec!r}: importing {path} failed: {type(exc).__name__}: {exc}"
        ) from exc
    return module


async def run_target(
    target: Target | str,
    samples: Sequence[Sample],
    *,
    concurrency: int = 4,
    timeout: float | None = None,
) -> TargetRun:
    """Call ``target`` on each sample's question, at most ``concurrency`` calls at a time.

    Sync callables run in worker threads, async ones on the running loop. ``timeout`` (seconds)
    bounds each call; a sync call that times out is abandoned, not stopped (a thread cannot be
    killed), so its thread finishes in the background. Failures never raise: each is recorded.
    """
    if isinstance(target, str):
        target = resolve_target(target)
    check_settings(concurrency, timeout)
    limit = asyncio.Semaphore(concurrency)
    executor = None if is_async(target) else ThreadPoolExecutor(concurrency, "rag-judge-target")
    call = caller(target, executor)
    counter = progress.task("target", len(samples), "calls")

    async def one(sample: Sample) -> tuple[Sample, float | None, str | None]:
        result = await attempt(sample)
        counter.update(done=1, failed=result[2] is not None)
        return result

    async def attempt(sample: Sample) -> tuple[Sample, float | None, str | None]:
        if sample.question is None:
            return failed_sample(sample), None, _no_question(sample)
        async with limit:
            start = time.perf_counter()
            try:
                value = await asyncio.wait_for(call(sample.question), timeout)
            except asyncio.TimeoutError:
                return failed_sample(sample), None, f"timed out after {timeout:g} s"
            except Exception as exc:  # the system under test may raise anything
                return failed_sample(sample), None, f"{type(exc).__name__}: {exc}"
            latency = time.perf_counter() - start
        try:
            return filled_sample(sample, value), latency, None
        except ValueError as exc:
            return failed_sample(sample), None, str(exc)

    return await gathered(one, samples, counter, executor)


async def gathered(
    one: Callable[[Sample], Awaitable[tuple[Sample, float | None, str | None]]],
    samples: Sequence[Sample],
    counter: progress.Task,
    executor: ThreadPoolExecutor | None,
) -> TargetRun:
    """``one`` over every sample at once, as a run: the counter closed and the worker threads
    let go however it ends (a thread stuck in a timed-out call is abandoned, not awaited)."""
    try:
        results = await asyncio.gather(*(one(s) for s in samples))
    finally:
        counter.close()
        if executor is not None:
            executor.shutdown(wait=False, cancel_futures=True)
    return TargetRun(
        samples=[r[0] for r in results],
        latency=[r[1] for r in results],
        errors=[r[2] for r in results],
    )


def check_settings(concurrency: int, timeout: float | None) -> None:
    """A ConfigError for a concurrency or a timeout no run can use."""
    if isinstance(concurrency, bool) or not isinstance(concurrency, int) or concurrency < 1:
        raise ConfigError(f"target concurrency must be an integer >= 1, got {concurrency!r}")
    if timeout is not None and not timeout > 0:
        raise ConfigError(f"target timeout must be > 0 seconds or None, got {timeout!r}")


def run_target_sync(
    target: Target | str,
    samples: Sequence[Sample],
    *,
    concurrency: int = 4,
    timeout: float | None = None,
) -> TargetRun:
    """:func:`run_target` from synchronous code, whether or not an event loop is running here
    (a notebook or an async web handler has one: then the run gets its own loop in a thread)."""
    return run_sync(run_target(target, samples, concurrency=concurrency, timeout=timeout))


def is_async(target: Target) -> bool:
    call = getattr(target, "__call__", None)  # noqa: B004 -- an object with async __call__
    return inspect.iscoroutinefunction(target) or inspect.iscoroutinefunction(call)


def caller(target: Target, executor: ThreadPoolExecutor | None) -> Callable[[str], Awaitable[Any]]:
    async def call(question: str) -> Any:
        if executor is None:
            value = target(question)
        else:
            loop = asyncio.get_running_loop()
            ctx = contextvars.copy_context()
            value = await loop.run_in_executor(
                executor, functools.partial(ctx.run, target, question)
            )
        # A sync wrapper may still hand back a coroutine (a lambda around an async function).
        return await value if inspect.isawaitable(value) else value

    return call


def _no_question(sample: Sample) -> str:
    if sample.is_conversation():
        return "the sample is a conversation: a target is called with one question"
    return "the sample has no question"


def failed_sample(sample: Sample) -> Sample:
    """The sample as a failed call leaves it: no answer and no contexts. A conversation's
    turns keep their questions and gold, not the dataset's answers and steps: those are not
    what the system did."""
    if sample.turns is not None:
        turns = tuple(t.model_copy(update={"answer": None, "steps": ()}) for t in sample.turns)
        return sample.model_copy(update={"turns": turns})
    return sample.model_copy(update={"answer": None, "contexts": ()})


def checked_answer(answer: Any) -> str:
    """``answer`` when it is a string; else a ValueError naming its type."""
    if not isinstance(answer, str):
        raise ValueError(f"target returned an answer of type {type(answer).__name__}, not str")
    return answer


def filled_sample(sample: Sample, value: Any) -> Sample:
    """The sample with the target's answer and contexts (or turns); ValueError names a wrong
    shape."""
    out = unpack(value)
    if out.turns is not None or out.steps is not None:
        return validated_sample(_conversation(sample, out))
    answer, contexts = checked_answer(out.answer), out.contexts
    if contexts is None:
        contexts = []
    if isinstance(contexts, str) or not isinstance(contexts, Sequence):
        raise ValueError(
            f"target returned contexts of type {type(contexts).__name__}; expected a list of "
            "strings or {'id', 'text', 'score'} objects"
        )
    items = [c.model_dump() if isinstance(c, Context) else c for c in contexts]
    data = sample.model_dump(exclude={"answer", "contexts"})
    return validated_sample({**data, "answer": answer, "contexts": items})


def _conversation(sample: Sample, out: _Output) -> dict[str, Any]:
    """The sample's fields with the target's turns (or its one turn of steps)."""
    if out.turns is None:
        if not isinstance(out.answer, str):
            raise ValueError(
                f"target returned an answer of type {type(out.answer).__name__}, not str"
            )
        turns: Any = [{"steps": out.steps, "answer": out.answer}]
    else:
        turns = out.turns
    if isinstance(turns, str) or not isinstance(turns, Sequence) or not turns:
        raise ValueError(
            f"target returned turns of type {type(turns).__name__}; expected a non-empty list "
            "of {'question', 'steps', 'answer'} objects"
        )
    turns = [t.model_dump() if isinstance(t, Turn) else t for t in turns]
    first = turns[0]
    if isinstance(first, Mapping):
        first = dict(first)
        if first.get("question") is None:
            first["question"] = sample.question
        for key in _GOLD:
            if first.get(key) in (None, (), []) and getattr(sample, key) not in (None, ()):
                first[key] = getattr(sample, key)
        turns = [first, *turns[1:]]
    data = sample.model_dump(exclude={"question", "answer", "contexts", *_GOLD, "turns"})
    return {**data, "turns": turns}


def validated_sample(data: dict[str, Any]) -> Sample:
    try:
        return Sample.model_validate(data)
    except ValidationError as exc:
        problems = "; ".join(
            f"'{p.field}': {p.message}" if p.field else p.message
            for p in input_problems(exc, Sample, expected=SAMPLE_EXPECTED)
        )
        raise ValueError(f"target returned invalid output: {problems}") from None


def unpack(value: Any) -> _Output:
    if isinstance(value, Mapping):
        unknown = [k for k in value if k not in _DICT_KEYS]
        if "turns" in value and len(value) > 1:
            others = ", ".join(repr(k) for k in value if k != "turns")
            raise ValueError(
                f"target returned a dict with 'turns' beside {others}; the turns hold the "
                "answers and steps"
            )
        if ("answer" not in value and "turns" not in value) or unknown:
            what = f"unknown key {unknown[0]!r}" if unknown else "no 'answer' key"
            raise ValueError(f"target returned a dict with {what}; expected {_SHAPES}")
        if value.get("contexts") and value.get("steps") is not None:
            raise ValueError(
                "target returned a dict with both 'contexts' and 'steps'; a retrieval step "
                "holds contexts"
            )
        return _Output(
            value.get("answer"), value.get("contexts"), value.get("steps"), value.get("turns")
        )
    if isinstance(value, tuple) and len(value) == 2:
        return _Output(value[0], value[1])
    if getattr(value, "turns", None) is not None and not isinstance(value, str | bytes):
        return _Output(turns=value.turns)
    if hasattr(value, "answer") and not isinstance(value, str | bytes):
        steps = getattr(value, "steps", None)
        contexts = getattr(value, "contexts", None)
        if steps is not None and contexts:
            raise ValueError(
                "target returned an object with both .contexts and .steps; a retrieval step "
                "holds contexts"
            )
        return _Output(value.answer, contexts, steps)
    shape = f"a tuple of {len(value)}" if isinstance(value, tuple) else type(value).__name__
    raise ValueError(f"target returned {shape}; expected {_SHAPES}")
