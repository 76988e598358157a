"""The side process of a run with ``processes: 2`` (rag_judge.pipeline.passes), run as
``python -m rag_judge.pipeline._side_worker FD``: FD is its end of a socket pair to the run.

It is sent the dataset's path, the chunk size, the evaluators and the run's log level; it
says it is ready once they are prepared, then reads the dataset in the run's chunks and
answers each chunk with every evaluator's result and seconds, then with each evaluator's
final word (None for one that crashed), or with an error that stops it.
"""

from __future__ import annotations

import logging
import pickle
import signal
import sys
from multiprocessing.connection import Connection
from pathlib import Path

from rag_judge.data.stream import JsonlSource
from rag_judge.pipeline.together import Rider, fixed_mmap_threshold

__all__: list[str] = []


def _send(conn: Connection, message: object) -> None:
    conn.send_bytes(pickle.dumps(message, pickle.HIGHEST_PROTOCOL))


def _worker_main(fd: int) -> None:
    # Ctrl-C reaches the whole process group: the run handles it and then stops us.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    fixed_mmap_threshold()
    conn = Connection(fd)
    try:
        path, size, labels, evaluators, level = pickle.loads(conn.recv_bytes())
        logging.basicConfig(format="%(levelname)s %(name)s (side process): %(message)s")
        logging.getLogger("rag_judge").setLevel(level)
        riders = [
            Rider(label, ev.prepare(), None) for label, ev in zip(labels, evaluators, strict=True)
        ]
        _send(conn, ("ready", None))
        source = JsonlSource(Path(path))
        source.checked()  # the run checks the ids; this pass only reads
        for chunk in source.chunks(size):
            _send(conn, ("chunk", [(r.score(chunk), r.last) for r in riders]))
        _send(conn, ("end", [r.final() for r in riders]))
    except Exception as exc:  # the run says so: before "ready" it scores here instead
        _send(conn, ("error", f"{type(exc).__name__}: {exc}"))
    finally:
        conn.close()


if __name__ == "__main__":
    _worker_main(int(sys.argv[1]))
