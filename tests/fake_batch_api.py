"""The Batch API of ``FakeOpenAIServer`` (tests/fake_openai_server.py): files and batches as
OpenAI serves them, each batch scripted by a ``BatchPlan``."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Collection
from dataclasses import dataclass
from typing import Any, Literal

__all__ = ["BatchPlan", "BatchRoutes", "read_chunked"]


@dataclass
class BatchPlan:
    """How one batch goes: "in_progress" for ``polls`` retrievals, then ``outcome``. An expired
    batch ran only its first ``ran`` lines (the rest are "batch_expired" in the error file);
    the lines at the indices in ``drop`` are in neither file; a failed batch has no files."""

    polls: int = 0
    outcome: Literal["completed", "expired", "failed"] = "completed"
    ran: int = 0
    drop: Collection[int] = ()


class BatchRoutes:
    """The ``/v1/files`` and ``/v1/batches`` routes, mixed into ``FakeOpenAIServer``: lines run
    through the server's own script (``_next``) and reply builder (``_send``)."""

    files: dict[str, bytes]
    batch_state: dict[str, dict[str, Any]]
    batch_lines: list[dict[str, Any]]
    _plans: list[BatchPlan]
    _batch_plan: dict[str, BatchPlan]
    _polled: dict[str, int]
    _next: Callable[[dict[str, Any]], Any]
    _send: Callable[..., tuple[int, dict[str, str], Any]]

    # ---- the Batch API --------------------------------------------------------------------

    def _batch_api(
        self, method: str, path: str, headers: dict[str, str], data: bytes
    ) -> tuple[int, dict[str, str], Any]:
        parts = path.split("/v1/", 1)[1].split("/")
        if method == "POST" and parts == ["files"]:
            blob = _multipart_file(headers.get("content-type", ""), data)
            file_id = f"file-{len(self.files) + 1}"
            self.files[file_id] = blob
            return 200, {}, _file_object(file_id, blob, "batch")
        if method == "GET" and len(parts) == 3 and parts[0] == "files" and parts[2] == "content":
            if parts[1] not in self.files:
                return 404, {}, {"error": {"message": f"no file {parts[1]}"}}
            return 200, {"Content-Type": "application/octet-stream"}, self.files[parts[1]]
        if method == "POST" and parts == ["batches"]:
            body = json.loads(data or b"{}")
            if body.get("input_file_id") not in self.files:
                return 400, {}, {"error": {"message": "input_file_id is not a file"}}
            batch_id = f"batch_{len(self.batch_state) + 1}"
            plan = self._plans.pop(0) if self._plans else BatchPlan()
            self._batch_plan[batch_id] = plan
            self._polled[batch_id] = 0
            self.batch_state[batch_id] = _batch_object(batch_id, body, "validating")
            return 200, {}, self.batch_state[batch_id]
        if method == "GET" and len(parts) == 2 and parts[0] == "batches":
            batch = self.batch_state.get(parts[1])
            if batch is None:
                return 404, {}, {"error": {"message": f"no batch {parts[1]}"}}
            self._advance(parts[1])
            return 200, {}, batch
        return 404, {}, {"error": {"message": f"no route {method} {path}"}}

    def _advance(self, batch_id: str) -> None:
        batch, plan = self.batch_state[batch_id], self._batch_plan[batch_id]
        if batch["status"] not in ("validating", "in_progress"):
            return
        self._polled[batch_id] += 1
        if self._polled[batch_id] <= plan.polls:
            batch["status"] = "in_progress"
            return
        if plan.outcome == "failed":
            batch["status"] = "failed"
            batch["errors"] = {"data": [{"code": "invalid_request", "message": "scripted"}]}
            return
        lines = [json.loads(x) for x in self.files[batch["input_file_id"]].splitlines() if x]
        out: list[bytes] = []
        err: list[bytes] = []
        for n, line in enumerate(lines):
            if n in plan.drop:
                continue
            if plan.outcome == "expired" and n >= plan.ran:
                gone = {"code": "batch_expired", "message": "not run before the window ended"}
                err.append(_line(line["custom_id"], None, gone))
                continue
            self.batch_lines.append(line["body"])
            reply = self._next(line["body"])
            status, _, payload = self._send(reply, line["body"])
            (out if status == 200 else err).append(
                _line(line["custom_id"], {"status_code": status, "body": payload}, None)
            )
        for name, rows in (("output_file_id", out), ("error_file_id", err)):
            if rows:
                file_id = f"file-{len(self.files) + 1}"
                self.files[file_id] = b"\n".join(rows) + b"\n"
                batch[name] = file_id
        batch["status"] = plan.outcome
        batch["request_counts"] = {"total": len(lines), "completed": len(out), "failed": len(err)}


async def read_chunked(reader: asyncio.StreamReader) -> bytes:
    data = b""
    while True:
        size = int((await reader.readline()).split(b";")[0].strip() or b"0", 16)
        if size == 0:
            await reader.readline()  # the blank line after the last chunk
            return data
        data += await reader.readexactly(size)
        await reader.readline()


def _multipart_file(content_type: str, data: bytes) -> bytes:
    """The ``file`` part of a multipart/form-data body."""
    boundary = content_type.split("boundary=", 1)[1].strip('"').encode()
    for part in data.split(b"--" + boundary):
        head, _, body = part.partition(b"\r\n\r\n")
        if b'name="file"' in head:
            return body[:-2] if body.endswith(b"\r\n") else body
    raise ValueError("no file part in the upload")


def _file_object(file_id: str, blob: bytes, purpose: str) -> dict[str, Any]:
    return {"id": file_id, "object": "file", "bytes": len(blob), "created_at": 0,
            "filename": "requests.jsonl", "purpose": purpose, "status": "processed"}  # fmt: skip


def _batch_object(batch_id: str, body: dict[str, Any], status: str) -> dict[str, Any]:
    return {"id": batch_id, "object": "batch", "endpoint": body.get("endpoint"),
            "input_file_id": body["input_file_id"], "completion_window": "24h",
            "status": status, "created_at": 0, "output_file_id": None,
            "error_file_id": None, "errors": None}  # fmt: skip


def _line(custom_id: str, response: Any, err: Any) -> bytes:
    row = {"id": f"batch_req_{custom_id[:8]}", "custom_id": custom_id, "response": response,
           "error": err}  # fmt: skip
    return json.dumps(row).encode()
