"""AWS's documented rules for a Lambda response to an SQS batch, as one pure function.

Why apart from the poller: these rules decide which messages are deleted, so they are the
emulator's most important behaviour and are tested case by case without any engine
(tests/localcloud/test_batchrules.py). The rules, from "Handling errors for an SQS event
source in Lambda" (ReportBatchItemFailures):

- the function raised, timed out or crashed: the whole batch fails;
- without ReportBatchItemFailures, any normal return is a full success;
- with it, a null response, an empty response, a null or empty ``batchItemFailures``
  list: full success;
- a response that is not a JSON object, a ``batchItemFailures`` that is not a list, an
  entry without ``itemIdentifier`` (bad key name), a null or empty ``itemIdentifier``, or
  an ``itemIdentifier`` that is not a message id of this batch: the whole batch fails;
- otherwise the listed messages fail and every other message of the batch succeeds.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

#: A response that could not be parsed as JSON (what the worker returns for it).
MALFORMED = object()


@dataclass(frozen=True)
class Decision:
    """Which messages of the batch to delete and which to leave for redelivery."""

    delete: tuple[str, ...]
    retry: tuple[str, ...]
    reason: str
    #: The whole batch failed by rule (error or bad response), not by listing every id.
    full_failure: bool = False


def _all_fail(ids: Sequence[str], reason: str) -> Decision:
    return Decision((), tuple(ids), reason, full_failure=True)


def decide(
    message_ids: Sequence[str],
    response: Any,
    *,
    error: str | None = None,
    report_batch_item_failures: bool = True,
) -> Decision:
    """Apply the rules to one invocation.

    ``response`` is the function's return value as parsed from its JSON payload (or
    ``MALFORMED``); ``error`` says that it raised, timed out or crashed.
    """
    ids = list(message_ids)
    if error is not None:
        return _all_fail(ids, f"function error: {error}")
    if response is MALFORMED:
        return _all_fail(ids, "response is not valid JSON")
    if not report_batch_item_failures:
        return Decision(tuple(ids), (), "success")
    if response is None:
        return Decision(tuple(ids), (), "success (null response)")
    if not isinstance(response, dict):
        return _all_fail(ids, "response is not a JSON object")
    failures = response.get("batchItemFailures")
    if failures is None:
        return Decision(tuple(ids), (), "success (no batchItemFailures)")
    if not isinstance(failures, list):
        return _all_fail(ids, "batchItemFailures is not a list")
    in_batch = set(ids)
    failed: set[str] = set()
    for entry in failures:
        if not isinstance(entry, dict) or "itemIdentifier" not in entry:
            return _all_fail(ids, "a batchItemFailures entry has no itemIdentifier")
        identifier = entry["itemIdentifier"]
        if identifier is None or identifier == "":
            return _all_fail(ids, "null or empty itemIdentifier")
        if not isinstance(identifier, str) or identifier not in in_batch:
            return _all_fail(ids, f"itemIdentifier {identifier!r} is not in the batch")
        failed.add(identifier)
    return Decision(
        tuple(i for i in ids if i not in failed),
        tuple(i for i in ids if i in failed),
        "partial failure" if failed else "success",
    )
