"""The OpenAI Batch API behind ``JudgeEngine.run``: ``batch: true`` on an openai client.

The engine hands over the requests its cache could not answer. They go out as one JSONL file
of ``/v1/chat/completions`` bodies (a batch per 50,000 requests), each line's ``custom_id`` the
request's cache key. The file is uploaded (``POST /v1/files``, purpose "batch"), the batch
created (``POST /v1/batches``) and polled (``GET /v1/batches/{id}``) with capped backoff on the
engine's injectable sleep. Its output and error files are then read back line by line.

A reply enters the same SQLite cache as a direct call's. A line's error, a missing line, or an
expired or failed batch is that request's ``LLMError``, never the run's end. The id of a batch
submitted but not yet read back is kept in ``batches/<hash of its requests>.json`` in the cache
folder. A run killed in between polls that batch again on its rerun instead of paying twice.
See docs/batch.md.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Protocol

from pydantic import BaseModel

from rag_judge.llm.base import Completion, CompletionRequest, LLMError
from rag_judge.llm.http import server_text
from rag_judge.resources import cache_dir

if TYPE_CHECKING:
    from rag_judge.llm.cache import SqliteCache
    from rag_judge.llm.providers.openai import OpenAIClient
    from rag_judge.llm.ratelimit import Sleeper
    from rag_judge.report.model import Usage

__all__ = [
    "BATCH_DISCOUNT",
    "MAX_REQUESTS",
    "POLL_INITIAL",
    "POLL_MAX",
    "batch_note",
    "run_batch",
    "state_folder",
]

# OpenAI bills batch requests at half its normal prices (openai.com/api/pricing, "Batch API").
# Kept here, not in a price table, so a table's rows stay the provider's list prices.
BATCH_DISCOUNT = 0.5
MAX_REQUESTS = 50_000  # OpenAI's limit on the requests of one batch
POLL_INITIAL = 2.0  # seconds before the second poll; each next wait is 1.5 times longer
POLL_MAX = 60.0  # no wait between polls is longer than this
POLL_ERRORS = 5  # polls in a row that may fail (a 5xx, a dropped connection) before giving up
_TERMINAL = frozenset({"completed", "expired", "failed", "cancelled"})
_ENDPOINT: Literal["/v1/chat/completions"] = "/v1/chat/completions"

log = logging.getLogger(__name__)
Result = Completion | LLMError


class JudgeEngine(Protocol):
    """What this module uses of ``rag_judge.llm.engine.JudgeEngine`` (named here, not imported:
    the engine imports this module)."""

    client: Any
    cache: SqliteCache | None
    usage: Usage
    _sleep: Sleeper

    def _account(self, completion: Completion) -> None: ...


def state_folder(engine: JudgeEngine) -> Path:
    """Where submitted batches are noted: ``batches/`` beside the engine's cache file, else in
    rag-judge's cache folder (``rag_judge.resources.cache_dir``)."""
    path = getattr(engine.cache, "path", None)
    return (path.parent if isinstance(path, Path) else cache_dir()) / "batches"


def batch_note(config: object) -> str | None:
    """A line for a dry run when any client in ``config`` (a pydantic model, walked) has
    ``batch: true``: its prices are the batch prices. None when none has."""
    if not _any_batch(config, 0):
        return None
    return (
        f"batch: true: requests go through the OpenAI Batch API, priced at {BATCH_DISCOUNT:.0%} "
        "of the normal price (the cost above includes it); replies may take up to 24 h"
    )


def _any_batch(value: object, depth: int) -> bool:
    if depth > 8:
        return False
    if isinstance(value, BaseModel):
        if getattr(value, "batch", None) is True and hasattr(value, "provider"):
            return True
        return any(_any_batch(getattr(value, f), depth + 1) for f in type(value).model_fields)
    if isinstance(value, list | tuple):
        return any(_any_batch(v, depth + 1) for v in value)
    if isinstance(value, dict):
        return any(_any_batch(v, depth + 1) for v in value.values())
    return False


async def run_batch(
    engine: JudgeEngine, items: Sequence[tuple[str, CompletionRequest]]
) -> dict[str, Result]:
    """The result of each ``(key, request)``, by key, through the Batch API; usage counted and
    replies cached on ``engine`` as its direct calls are."""
    client: OpenAIClient = engine.client  # the engine batches only for a batch client
    found: dict[str, Result] = {}
    for start in range(0, len(items), MAX_REQUESTS):
        found.update(await _one_batch(engine, client, items[start : start + MAX_REQUESTS]))
    engine.usage.requests += len(items)
    for key, result in found.items():
        if isinstance(result, LLMError):
            engine.usage.failures += 1
            continue
        engine._account(result)
        if engine.cache is not None:
            try:
                await engine.cache.store(key, result)
            except Exception as exc:  # a full disk costs a rerun, not this run
                log.warning("could not cache a completion: %s", exc)
    return found


async def _one_batch(
    engine: JudgeEngine, client: OpenAIClient, items: Sequence[tuple[str, CompletionRequest]]
) -> dict[str, Result]:
    folder = state_folder(engine)
    digest = hashlib.sha256("\n".join(sorted(k for k, _ in items)).encode()).hexdigest()[:32]
    note = folder / f"{digest}.json"
    batch_id = _read_note(note)
    if batch_id is not None:
        log.info("resuming batch %s (%d requests) noted in %s", batch_id, len(items), note)
    batch: dict[str, Any] | LLMError | None = None
    if batch_id is not None:
        batch = await _poll(engine, client, batch_id)
        if isinstance(batch, LLMError) and batch.status == 404:  # gone: submit it anew
            batch_id, batch = None, None
    if batch_id is None:
        submitted = await _submit(client, items)
        if isinstance(submitted, LLMError):
            return dict.fromkeys((k for k, _ in items), submitted)
        batch_id = submitted
        folder.mkdir(parents=True, exist_ok=True)
        note.write_text(json.dumps({"batch_id": batch_id, "requests": len(items)}))
        log.info("submitted batch %s (%d requests)", batch_id, len(items))
        batch = await _poll(engine, client, batch_id)
    if isinstance(batch, LLMError) or batch is None:
        failed = batch or LLMError(f"batch {batch_id}: no status")
        return dict.fromkeys((k for k, _ in items), failed)
    found = await _read_back(client, batch, items)
    note.unlink(missing_ok=True)  # read back: a rerun is answered by the cache
    return found


def _read_note(note: Path) -> str | None:
    try:
        batch_id = json.loads(note.read_text())["batch_id"]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return batch_id if isinstance(batch_id, str) else None


async def _submit(
    client: OpenAIClient, items: Sequence[tuple[str, CompletionRequest]]
) -> str | LLMError:
    """Upload the requests as JSONL and create their batch: its id, or why not."""
    lines = []
    for key, request in items:
        use_format = client.structured_output and request.json_schema is not None
        row = {"custom_id": key, "method": "POST", "url": _ENDPOINT,
               "body": client._params(request, use_format)}  # fmt: skip
        lines.append(json.dumps(row, ensure_ascii=False, separators=(",", ":")))
    blob = ("\n".join(lines) + "\n").encode("utf-8")
    try:
        sdk = client._client()
        uploaded = await sdk.files.create(
            file=("requests.jsonl", blob, "application/jsonl"), purpose="batch"
        )
        created = await sdk.batches.create(
            input_file_id=uploaded.id, endpoint=_ENDPOINT, completion_window="24h"
        )
    except Exception as exc:
        return _failed("submitting the batch failed", client._error(exc))
    return str(created.id)


async def _poll(
    engine: JudgeEngine, client: OpenAIClient, batch_id: str
) -> dict[str, Any] | LLMError:
    """The batch once it has ended (completed, expired, failed, cancelled), or why not."""
    delay, errors = POLL_INITIAL, 0
    while True:
        try:
            batch = (await client._client().batches.retrieve(batch_id)).model_dump()
            errors = 0
        except Exception as exc:
            error = client._error(exc)
            errors += 1
            if not error.retryable or errors >= POLL_ERRORS:
                return _failed(f"polling batch {batch_id} failed", error)
            batch = {"status": "unknown"}
        if batch.get("status") in _TERMINAL:
            return batch
        log.debug("batch %s is %s; next poll in %.0f s", batch_id, batch.get("status"), delay)
        await engine._sleep(delay)
        delay = min(delay * 1.5, POLL_MAX)


async def _read_back(
    client: OpenAIClient, batch: dict[str, Any], items: Sequence[tuple[str, CompletionRequest]]
) -> dict[str, Result]:
    """Each request's reply or error, from the batch's output and error files."""
    batch_id, status = batch["id"], batch["status"]
    requests = dict(items)
    found: dict[str, Result] = {}
    for name in ("output_file_id", "error_file_id"):
        file_id = batch.get(name)
        if not file_id:
            continue
        try:
            content = await client._client().files.content(file_id)
            text = content.content.decode("utf-8")
        except Exception as exc:
            error = _failed(
                f"batch {batch_id}: reading {name} {file_id} failed", client._error(exc)
            )
            found.update({k: error for k in requests if k not in found})
            continue
        for raw in text.splitlines():
            if not raw.strip():
                continue
            line = json.loads(raw)
            key = line.get("custom_id")
            if key in requests:
                found[key] = _line_result(client, batch_id, line, requests[key])
    why = _batch_errors(batch) if status == "failed" else ""
    for key in requests:
        if key not in found:
            said = f": {why}" if why else ""
            found[key] = LLMError(
                f"batch {batch_id} {status} with no result for this request{said}"
            )
    return found


def _line_result(
    client: OpenAIClient, batch_id: str, line: dict[str, Any], request: CompletionRequest
) -> Result:
    from rag_judge.llm.providers.openai import _completion  # imported with its client only

    error, response = line.get("error"), line.get("response") or {}
    if error:
        said = server_text(error, client._key()) or "no explanation"
        return LLMError(f"batch {batch_id}: {error.get('code') or 'error'}: {said}")
    status = int(response.get("status_code") or 0)
    if status != 200:
        said = server_text(response.get("body"), client._key()) or "no explanation in the reply"
        return LLMError(f"batch {batch_id}: HTTP {status}: {said}", status=status)
    use_format = client.structured_output and request.json_schema is not None
    structured = use_format if request.json_schema is not None else None
    return _completion(response.get("body"), structured, client)


def _batch_errors(batch: dict[str, Any]) -> str:
    data = (batch.get("errors") or {}).get("data") or []
    return "; ".join(f"{e.get('code')}: {e.get('message')}" for e in data[:3])


def _failed(what: str, error: LLMError) -> LLMError:
    """``error`` as a batch failure (its status kept, so a caller can tell a 404)."""
    return LLMError(f"{what}: {error}", status=error.status, retryable=error.retryable)
