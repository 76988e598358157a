"""One evaluator's shards under ``executor: ray``, gathered as they finish: a shard whose
worker died runs again (``ray.retries`` times), said in the report; a shard lost for good fails
only its own samples; the warnings the workers logged are logged here, each once."""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import Any

from rag_judge.evaluators.base import Evaluator, EvaluatorResult
from rag_judge.pipeline.running import crashed
from rag_judge.report.model import ReportWarning, WarningKind

__all__ = ["ShardLost", "Shards", "brief"]

log = logging.getLogger("rag_judge")

# Ray's errors for an attempt that died with its process or node (killed, out of memory, the
# node gone), which a rerun may outlive; any other error (the task's own, a runtime_env that
# cannot be set up) would fail the same way again.
RERUN = ("WorkerCrashedError", "NodeDiedError", "ObjectLostError", "OutOfMemoryError")


class ShardLost(RuntimeError):
    """A shard's every attempt was lost; its samples fail with this as the reason."""


class Shards:
    """The shards of one evaluator (``label``: its step, ``evaluators[1] (judge)``), started
    at once; ``start(k)`` submits shard ``k``, ``bounds`` are the shards' sample offsets."""

    def __init__(
        self,
        label: str,
        evaluator: Evaluator,
        bounds: Sequence[int],
        start: Callable[[int], Any],
        retries: int,
    ) -> None:
        self.label = label
        self.evaluator = evaluator
        self.bounds = list(bounds)
        self.start = start
        self.retries = retries
        self.refs = {start(k): k for k in range(len(self.bounds) - 1)}
        self.warnings: list[ReportWarning] = []  # filled by gather()
        self.lost: set[int] = set()  # the shards lost for good

    def gather(self) -> EvaluatorResult:
        """Every shard's result, joined in shard order; a lost attempt is run again at once."""
        import ray

        count = len(self.bounds) - 1
        results: list[EvaluatorResult | None] = [None] * count
        attempts = [1] * count
        logged: dict[tuple[int, str], list[int]] = {}  # (level, message) -> shards
        waiting = dict(self.refs)
        while waiting:
            (ref,), _ = ray.wait(list(waiting), num_returns=1)
            k = waiting.pop(ref)
            try:
                result, lines = ray.get(ref)
            except ray.exceptions.RayError as exc:
                if type(exc).__name__ in RERUN and attempts[k] <= self.retries:
                    attempts[k] += 1
                    log.warning(
                        "%s: %s: its worker died (%s); running it again (attempt %d)",
                        *(self.label, self._shard(k), type(exc).__name__, attempts[k]),
                    )
                    waiting[self.start(k)] = k
                    continue
                results[k] = self._lost(k, attempts[k], exc)
                continue
            results[k] = result
            for line in lines:
                logged.setdefault(tuple(line), []).append(k)
        for (level, message), shards in logged.items():
            which = ", ".join(str(k + 1) for k in sorted(shards))
            plural = "s" if len(shards) > 1 else ""
            log.log(
                level, "%s, ray shard%s %s of %d: %s", self.label, plural, which, count, message
            )
        self._reruns(attempts)
        merge = self.evaluator.merge_signature
        return EvaluatorResult.concat([r for r in results if r is not None], merge=merge)

    def _shard(self, k: int) -> str:
        a, b = self.bounds[k], self.bounds[k + 1]
        return f"ray shard {k + 1} of {len(self.bounds) - 1} (samples {a + 1}-{b})"

    def _lost(self, k: int, attempts: int, exc: Exception) -> EvaluatorResult:
        """Shard ``k`` lost for good: its samples fail every metric of the evaluator, with why."""
        why = brief(exc, 200)
        tries = f"its worker died on all {attempts} attempts" if attempts > 1 else "it failed"
        message = f"{self._shard(k)} was lost: {tries} ({why})"
        n = self.bounds[k + 1] - self.bounds[k]
        self.lost.add(k)
        self.warnings.append(
            ReportWarning(
                kind=WarningKind.SHARD_LOST,
                metric=self.label,
                value=n,
                threshold=self.retries,
                message=f"{message}; its {n} samples failed every metric of {self.label}, "
                "the other shards' results are kept. The run failed.",
            )
        )
        log.error("%s: %s", self.label, message)
        return crashed(self.evaluator, n, ShardLost(message))

    def _reruns(self, attempts: list[int]) -> None:
        """One warning for the shards that ran again and finished."""
        rerun = [k for k, a in enumerate(attempts) if a > 1 and k not in self.lost]
        if not rerun:
            return
        lost = sum(attempts[k] - 1 for k in rerun)
        shards = "; ".join(f"{self._shard(k)}: {attempts[k]} attempts" for k in rerun)
        self.warnings.append(
            ReportWarning(
                kind=WarningKind.SHARD_RERUN,
                metric=self.label,
                value=lost,
                threshold=self.retries,
                message=f"a Ray worker died and its shard ran again ({shards}); the numbers are "
                "the last attempt's. A lost attempt's model calls are not in the usage: the "
                "calls it finished are in the judge cache, which the rerun read back (counted "
                "as cache hits; with cache: null they were sent again), and calls in flight "
                "when it died were sent but not counted.",
            )
        )


def brief(exc: BaseException, limit: int) -> str:
    """``Type: first line of the message``, cut at ``limit`` characters: Ray's errors carry
    the worker's whole traceback, which a report line or a config error must not."""
    first = (str(exc).strip().splitlines() or [""])[0][:limit]
    return f"{type(exc).__name__}: {first}"
