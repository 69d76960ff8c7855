"""A minimal once SQS consumer module: the cold-start counterpart of ``powertools_handler``.

The same business function (the parsed body back), keyed on ``paymentId`` as the Powertools
module is, with once's defaults: its table and service from the environment, backoff on, no
DLQ. The cold-start benchmark imports it as a top-level module in fresh interpreters and
sends it one new record.
"""

from __future__ import annotations

from typing import Any

from once import Attempt, make_handler


def process(body: Any, attempt: Attempt) -> Any:
    return body


lambda_handler = make_handler(process, key="paymentId")
