"""Applies the retry backoff: one ``ChangeMessageVisibilityBatch`` per invocation (per ten
records, SQS's limit for one call) on the source queue, for the records the batch response
reports failed.

A change that fails is logged and changes nothing else: the record comes back after the
queue's own visibility timeout, as it would without backoff. Nothing here can fail the
batch or keep a record from being reported. Nor may it cost the invocation its deadline: a
Lambda timeout loses the batch response, and every record of the batch, acknowledged or
quarantined, comes back. So the time left is checked before each call, not once per batch:
a call is made only while the time left covers the reserve the batch response needs plus
the slowest call seen so far; the rest are skipped (logged) and come back after the queue's
timeout.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from typing import Any

from once.backoff import Backoff, source_queue_url
from once.models import Outcome, RecordResult
from once.observability import log_safely
from once.payload import describe_error
from once.sqsrecord import SqsRecord

#: SQS takes at most ten entries per ChangeMessageVisibilityBatch.
_BATCH = 10


class Visibility:
    """Sets when the records reported failed come back."""

    def __init__(self, client: Any, backoff: Backoff, logger: logging.Logger | Any) -> None:
        self._client = client
        self._backoff = backoff
        self._logger = logger

    def delay(
        self,
        records: Iterable[SqsRecord],
        handled: Iterable[RecordResult],
        *,
        time_left_ms: Callable[[], int] | None = None,
        reserve_ms: int = 0,
    ) -> None:
        """Set the visibility of every record the batch response reports failed.

        ``time_left_ms`` (the invocation's remaining time; None outside Lambda) is asked
        before each call: with less than ``reserve_ms`` plus the slowest call so far left,
        the remaining changes are skipped."""
        by_id = {record.message_id: record for record in records}
        by_queue: dict[str, list[dict[str, Any]]] = {}
        for index, end in enumerate(h for h in handled if not h.outcome.acknowledged):
            record = by_id[end.message_id]
            by_queue.setdefault(record.event_source_arn, []).append(
                {
                    "Id": str(index),
                    "ReceiptHandle": record.receipt_handle,
                    "VisibilityTimeout": self._timeout_s(record, end),
                }
            )
        calls = [
            (arn, entries[start : start + _BATCH])
            for arn, entries in by_queue.items()
            for start in range(0, len(entries), _BATCH)
        ]
        slowest_ms = 0
        for made, (arn, entries) in enumerate(calls):
            before = time_left_ms() if time_left_ms is not None else None
            if before is not None and before < reserve_ms + slowest_ms:
                log_safely(
                    self._logger,
                    "warning",
                    "visibility change skipped, too little time left: the records come back "
                    "after the queue's timeout",
                    remaining_ms=before,
                    records=sum(len(skipped) for _, skipped in calls[made:]),
                )
                return
            self._change(arn, entries)
            if before is not None and time_left_ms is not None:
                slowest_ms = max(slowest_ms, before - time_left_ms())

    def _timeout_s(self, record: SqsRecord, end: RecordResult) -> int:
        count = record.attributes.get("ApproximateReceiveCount")
        receive_count = int(count) if count and count.isdigit() else 1
        if end.outcome is Outcome.BUSY:
            return self._backoff.busy_delay_s(receive_count, end.holder_remaining_ms)
        return self._backoff.delay_s(receive_count)

    def _change(self, arn: str, entries: list[dict[str, Any]]) -> None:
        try:
            url = source_queue_url(self._client.meta.endpoint_url, arn)
            response = self._client.change_message_visibility_batch(QueueUrl=url, Entries=entries)
        except Exception as error:
            log_safely(
                self._logger,
                "warning",
                "visibility change failed: the records come back after the queue's timeout",
                records=len(entries),
                error=describe_error(error),
            )
            return
        failed = response.get("Failed") or []
        if failed:
            log_safely(
                self._logger,
                "warning",
                "visibility change refused for some records: they come back after the "
                "queue's timeout",
                records=len(failed),
                codes=sorted({f.get("Code") for f in failed}),
            )
