"""``make_handler``: turns a business function into an SQS batch handler for Lambda.

It resolves the configuration (arguments first, then environment variables, then the
defaults in ``constants``), creates the AWS clients once per process, and returns the
partial batch response. The handler raises only for a broken configuration; a record-level
problem always becomes an entry in ``batchItemFailures`` (or an acknowledgment).
"""

from __future__ import annotations

import os
from typing import Any

import boto3
from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSEvent
from botocore.config import Config

from once import constants as c
from once.models import METRIC_NAMES
from once.observability import logger, publish, subsegment
from once.payload import WHOLE_BODY, BodyReader
from once.processor import BatchProcessor, Process, Settings
from once.quarantine import Quarantine
from once.store import RecordStore

_FROM_ENV: Any = object()


class Handler:
    """The Lambda entry point made by ``make_handler``: call it with (event, context)."""

    def __init__(
        self,
        process: Process,
        *,
        table_name: str | None,
        dlq_url: str | None,
        reader: BodyReader,
        settings: Settings,
        retention_s: int,
    ) -> None:
        self._process = process
        self._table_name = table_name
        self._dlq_url = dlq_url
        self._reader = reader
        self._settings = settings
        self._retention_s = retention_s
        self._processor: BatchProcessor | None = None

    @property
    def processor(self) -> BatchProcessor:
        """Built at the first invocation, so that importing a handler needs no AWS."""
        if self._processor is None:
            if not self._table_name:
                raise RuntimeError(
                    f"no idempotency table: pass table_name= to make_handler or set "
                    f"{c.ENV_TABLE_NAME}"
                )
            # Requests are built here, so botocore's client-side validation only costs CPU.
            config = Config(
                parameter_validation=False,
                retries={"mode": "standard", "max_attempts": 3},
                max_pool_connections=max(10, self._settings.max_workers),
            )
            store = RecordStore(
                boto3.client("dynamodb", config=config),
                self._table_name,
                retention_s=self._retention_s,
            )
            quarantine = Quarantine(
                boto3.client("sqs", config=config) if self._dlq_url else None, self._dlq_url
            )
            self._processor = BatchProcessor(
                self._process, store, quarantine, self._reader, self._settings, logger
            )
        return self._processor

    def __call__(self, event: dict[str, Any], context: Any) -> dict[str, list[dict[str, str]]]:
        logger.append_keys(request_id=getattr(context, "aws_request_id", None))
        records = list(SQSEvent(event).records)
        processor = self.processor
        try:
            with subsegment("## once batch") as segment:
                handled = processor.run(records, context)
                if segment is not None:
                    segment.put_annotation("records", len(handled))
        except Exception:
            # A bug, not a record problem: acknowledge nothing, let SQS redeliver.
            logger.exception("batch aborted; every record will be redelivered")
            return {"batchItemFailures": [{"itemIdentifier": r.message_id} for r in records]}
        publish((METRIC_NAMES[h.outcome], h.takeover) for h in handled)
        return {
            "batchItemFailures": [
                {"itemIdentifier": h.message_id} for h in handled if not h.outcome.acknowledged
            ]
        }


def make_handler(
    process: Process,
    *,
    key: str,
    table_name: str | None = None,
    validate: str | None = WHOLE_BODY,
    dlq_url: str | None = _FROM_ENV,
    key_prefix: str | None = None,
    lease_margin_s: int = c.DEFAULT_LEASE_MARGIN_S,
    lock_timeout_s: int = c.DEFAULT_LOCK_TIMEOUT_S,
    retention_s: int | None = None,
    max_workers: int = c.DEFAULT_MAX_WORKERS,
    min_remaining_ms: int = c.DEFAULT_MIN_REMAINING_MS,
) -> Handler:
    """Wrap ``process(body, attempt)`` into a Lambda handler for SQS batches.

    ``key`` and ``validate`` are JMESPath expressions over the parsed JSON body: the business
    key, and the part whose hash must match on every delivery (``None``: no check).
    ``dlq_url=None`` turns the quarantine fast path off.
    """
    prefix = key_prefix or os.getenv(c.ENV_SERVICE_NAME)
    if not prefix:
        raise ValueError(f"no key prefix: pass key_prefix= or set {c.ENV_SERVICE_NAME}")
    settings = Settings(
        key_prefix=prefix,
        lease_margin_ms=lease_margin_s * 1000,
        lock_timeout_ms=lock_timeout_s * 1000,
        min_remaining_ms=min_remaining_ms,
        max_workers=max_workers,
    )
    return Handler(
        process,
        table_name=table_name or os.getenv(c.ENV_TABLE_NAME),
        dlq_url=os.getenv(c.ENV_DLQ_URL) if dlq_url is _FROM_ENV else dlq_url,
        reader=BodyReader(key, validate),
        settings=settings,
        retention_s=retention_s or int(os.getenv(c.ENV_RETENTION_S, c.DEFAULT_RETENTION_S)),
    )
