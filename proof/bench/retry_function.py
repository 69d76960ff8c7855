"""The Lambda function of the retry benchmark (``retry.py``): once's handler, with its retry
backoff (``with_backoff``) and without (``without_backoff``), over a business function
that holds its key for a while (so a racing duplicate is BUSY) and fails the first attempt
of a body marked ``fail_first``.

Each invocation appends, per record, when it ended and how (``busy``, ``failed`` or
``done``) to the JSON-lines file named by ``RETRY_MARKS_PATH``: the benchmark's only
window into the workers. The mapping emulator imports this module in its worker processes.
"""

from __future__ import annotations

import json
import os
import time
from typing import Any

from once.handler import Handler, make_handler
from once.models import Attempt

#: Where each invocation appends its marks (set by the benchmark in the workers' env).
MARKS_ENV = "RETRY_MARKS_PATH"
#: How long business code holds a key: the window in which a duplicate is BUSY.
HOLD_S = 0.5


def process(body: dict[str, Any], attempt: Attempt) -> dict[str, Any]:
    """Hold the key, and fail a ``fail_first`` body the first time it runs."""
    time.sleep(HOLD_S)
    if body.get("fail_first") and attempt.record is None:
        raise RuntimeError("first attempt fails (the benchmark's transient failure)")
    return {"id": body["id"]}


def _observed(handler: Handler) -> Any:
    def invoke(event: dict[str, Any], context: Any) -> dict[str, Any]:
        result = handler.handle(event, context)
        now = time.time()
        lines = "".join(
            json.dumps(
                {
                    "message": end.message_id,
                    "t": now,
                    "kind": "done" if end.outcome.acknowledged else str(end.outcome),
                }
            )
            + "\n"
            for end in result.records
        )
        with open(os.environ[MARKS_ENV], "a") as marks:
            marks.write(lines)
        return result.response

    return invoke


with_backoff = _observed(make_handler(process, key="id", dlq_url=None))
without_backoff = _observed(
    make_handler(process, key="id", dlq_url=None, backoff_base_s=None, backoff_max_s=None)
)
