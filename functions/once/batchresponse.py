"""Lambda's rule for a function's response to an SQS batch: which messages the event source
mapping deletes and which it leaves for redelivery, decided from what the function returned.

Why here, on the runtime's floor beside ``sendrules``: two emulations of Lambda apply it,
the test kit (``once.testing``, ``once_env``) and the local cloud (``oncecli.localcloud``'s
mapping, ``once invoke``), and the kit may not import the local cloud. Written once, below
both, they cannot disagree: a team's wrapper that returns ``None`` around the once handler
loses its failed records in both, as on AWS. Pure: no I/O, nothing of once imported.

The rule, from "Handling errors for an SQS event source in Lambda", "Reporting batch item
failures" (https://docs.aws.amazon.com/lambda/latest/dg/services-sqs-errorhandling.html),
row by row (tests/unit/runtime/test_batch_response_rule.py):

- E: the function raised, timed out or crashed, or Lambda's runtime could not marshal what
  it returned (``Runtime.MarshalError``): an error while processing the batch returns all
  of its messages to the queue (the same page, its opening).
- M: "An invalid JSON response": the whole batch comes back (with ReportBatchItemFailures:
  without it Lambda reads no response, row O).
- O: without ``ReportBatchItemFailures`` on the mapping, any response is a complete success
  (Lambda reads ``batchItemFailures`` only when the mapping's ``FunctionResponseTypes``
  holds ``ReportBatchItemFailures``): every message is deleted.
- S1: "Null EventResponse" (``None``): every message is deleted.
- S2: "Empty EventResponse" (``{}``, or an object without ``batchItemFailures``): every
  message is deleted.
- S3: "Null batchItemFailures list": every message is deleted.
- S4: "Empty batchItemFailures list": every message is deleted.
- F1: a response Lambda cannot read as an ``EventResponse`` (not a JSON object, a
  ``batchItemFailures`` that is not a list, an entry that is not an object): the whole
  batch comes back.
- F2: "itemIdentifier with a bad key name" (an entry without ``itemIdentifier``): the whole
  batch comes back.
- F3: "Empty string itemIdentifier", "Null itemIdentifier": the whole batch comes back.
- F4: "itemIdentifier value with a message ID that doesn't exist" in the batch (or one that
  is no string): the whole batch comes back.
- P: otherwise the listed messages come back (a message listed twice, once) and every other
  message of the batch is deleted.

How Lambda's Python runtime turns the returned value into the response it reads
(``marshal``), from its runtime interface client, ``awslambdaric.lambda_runtime_marshaller``
(https://github.com/aws/aws-lambda-python-runtime-interface-client): JSON, a ``Decimal`` as
its number, ``bytes`` passed as they are; anything else it cannot encode fails the invocation
with ``Runtime.MarshalError`` (row E).
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Any, Final

#: A response that could not be parsed as JSON (row M).
MALFORMED: Final = object()

#: The error of an invocation whose return value Lambda's runtime could not marshal.
MARSHAL_ERROR = "Runtime.MarshalError"


@dataclass(frozen=True)
class Decision:
    """Which messages of the batch Lambda deletes and which it leaves for redelivery."""

    delete: tuple[str, ...]
    retry: tuple[str, ...]
    #: Why, in the rule's words (the row's).
    reason: str
    #: The whole batch failed by rule (an error or a response Lambda cannot read), not by
    #: listing every message.
    full_failure: bool = False


class MarshalError(ValueError):
    """Lambda's Python runtime cannot encode the returned value as JSON."""


def _encode(value: object) -> Any:
    # awslambdaric's Encoder.default: a Decimal is its number (NaN stays NaN).
    if isinstance(value, Decimal):
        return math.nan if value.is_nan() else float(value)
    raise TypeError(f"Object of type {type(value).__name__} is not JSON serializable")


def marshal(returned: Any) -> str:
    """The response payload Lambda's Python runtime makes of what the handler returned:
    ``bytes`` as they are (``bytes`` only: the runtime's ``isinstance(response, bytes)``; a
    ``bytearray`` goes to the encoder, which refuses it), anything else encoded as JSON (a
    ``Decimal`` as its number). Raises ``MarshalError`` for a value it cannot encode (a
    set, an object, a circle, a ``bytearray``)."""
    if isinstance(returned, bytes):
        return returned.decode("utf-8", errors="replace")
    try:
        return json.dumps(returned, default=_encode)
    except (TypeError, ValueError, RecursionError) as error:
        raise MarshalError(f"Unable to marshal response: {error}") from None


def _not_json(constant: str) -> Any:
    raise ValueError(f"{constant} is not JSON")


def parse(payload: str) -> Any:
    """The response as Lambda reads it from the payload: strict JSON (no ``NaN``, no
    ``Infinity``, which Python's encoder writes and JSON has not), or ``MALFORMED``."""
    try:
        return json.loads(payload, parse_constant=_not_json)
    except (ValueError, RecursionError):
        return MALFORMED


def _all_fail(ids: Sequence[str], reason: str) -> Decision:
    return Decision((), tuple(ids), reason, full_failure=True)


def decide(
    message_ids: Sequence[str],
    response: Any,
    *,
    error: str | None = None,
    report_batch_item_failures: bool = True,
) -> Decision:
    """Apply the rule to one invocation of a batch of ``message_ids``.

    ``response`` is the function's response as Lambda parsed it from its payload (``parse``;
    ``MALFORMED`` when it is no JSON); ``error`` says that it raised, timed out, crashed or
    returned what could not be marshalled."""
    ids = list(message_ids)
    if error is not None:
        return _all_fail(ids, f"function error: {error}")  # E
    if not report_batch_item_failures:
        # Lambda reads the response only for ReportBatchItemFailures: without it, any
        # response (JSON or not) is a complete success.
        return Decision(tuple(ids), (), "success")  # O
    if response is MALFORMED:
        return _all_fail(ids, "response is not valid JSON")  # M
    if response is None:
        return Decision(tuple(ids), (), "success (null response)")  # S1
    if not isinstance(response, dict):
        return _all_fail(ids, "response is not a JSON object")  # F1
    failures = response.get("batchItemFailures")
    if failures is None:
        return Decision(tuple(ids), (), "success (no batchItemFailures)")  # S2, S3
    if not isinstance(failures, list):
        return _all_fail(ids, "batchItemFailures is not a list")  # F1
    in_batch = set(ids)
    failed: set[str] = set()
    for entry in failures:
        if not isinstance(entry, dict):
            return _all_fail(ids, "a batchItemFailures entry is not an object")  # F1
        if "itemIdentifier" not in entry:
            return _all_fail(ids, "a batchItemFailures entry has no itemIdentifier")  # F2
        identifier = entry["itemIdentifier"]
        if identifier is None or identifier == "":
            return _all_fail(ids, "null or empty itemIdentifier")  # F3
        if not isinstance(identifier, str) or identifier not in in_batch:
            return _all_fail(ids, f"itemIdentifier {identifier!r} is not in the batch")  # F4
        failed.add(identifier)
    return Decision(
        tuple(i for i in ids if i not in failed),
        tuple(i for i in ids if i in failed),
        "partial failure" if failed else "success",  # P (S4: an empty list)
    )


def judge(
    message_ids: Sequence[str],
    returned: Any,
    *,
    report_batch_item_failures: bool = True,
) -> Decision:
    """``decide`` for a value a handler returned in this process (the kit's invocations):
    marshalled and parsed as Lambda's runtime and the event source mapping would."""
    try:
        payload = marshal(returned)
    except MarshalError as error:
        return decide(
            message_ids,
            None,
            error=f"{MARSHAL_ERROR}: {error}",
            report_batch_item_failures=report_batch_item_failures,
        )
    return decide(
        message_ids, parse(payload), report_batch_item_failures=report_batch_item_failures
    )
