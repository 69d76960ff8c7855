"""The Powertools consumer, written the documented way: the peer ``once`` is compared with.

``idempotent_function`` on the record handler (a ``DynamoDBPersistenceLayer`` table keyed
by ``id``, an ``IdempotencyConfig`` whose key is the business key in the body), Powertools'
``BatchProcessor(EventType.SQS)`` with ``process_partial_response``, and the Lambda context
registered on the config at each invocation, as the Powertools docs show. Nothing here is
tuned or handicapped: records run one after the other because that is what the
``BatchProcessor`` does, and every record is one idempotent call.

On a FIFO queue (``fifo=True``) the processor is Powertools' ``SqsFifoPartialProcessor``
with its defaults: it stops at the first failure and reports every record after it.

When every record of a batch fails, ``process_partial_response`` raises
``BatchProcessingError`` (Powertools' default): the invocation fails and SQS redelivers the
whole batch, which is what a caller must take it to mean.

Business code gets the same ``(body, attempt)`` arguments as under ``once``; Powertools has
no fence, so ``attempt.fence`` is always 0 and ``attempt.takeover`` always False.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, cast

import jmespath
from aws_lambda_powertools.utilities.batch import (
    BatchProcessor,
    EventType,
    SqsFifoPartialProcessor,
    process_partial_response,
)
from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord
from aws_lambda_powertools.utilities.idempotency import (
    DynamoDBPersistenceLayer,
    IdempotencyConfig,
    idempotent_function,
)

from proof.chaos.peers.attempt import Attempt

Process = Callable[[Any, Attempt], Any]
Handler = Callable[[dict[str, Any], Any], dict[str, Any]]

#: Powertools keeps a record this long by default (1 hour); ``once`` keeps its for weeks.
DEFAULT_EXPIRES_AFTER_S = 3600


def make_handler(
    process: Process,
    *,
    table_name: str,
    key: str = "paymentId",
    validate: bool = True,
    client: Any = None,
    expires_after_seconds: int = DEFAULT_EXPIRES_AFTER_S,
    fifo: bool = False,
    key_prefix: str | None = None,
) -> Handler:
    """An SQS batch handler: Powertools idempotency on each record, partial batch response.

    ``key`` is a JMESPath over the JSON body (it becomes ``powertools_json(body).<key>``);
    ``validate`` hashes the whole body into the record, like ``once``'s default, so that a
    different payload under a known key is refused. ``client`` is a boto3 DynamoDB client
    (default: Powertools creates its own from the default session). ``key_prefix``: the
    records' key prefix (default: Powertools' own, from the function's name), to keep two
    consumers that share a table apart.
    """
    persistence = DynamoDBPersistenceLayer(table_name=table_name, boto3_client=client)
    config = IdempotencyConfig(
        event_key_jmespath=f"powertools_json(body).{key}",
        payload_validation_jmespath="powertools_json(body)" if validate else "",
        raise_on_no_idempotency_key=True,
        expires_after_seconds=expires_after_seconds,
    )
    processor: BatchProcessor = (
        SqsFifoPartialProcessor() if fifo else BatchProcessor(event_type=EventType.SQS)
    )
    key_path = jmespath.compile(key)

    @idempotent_function(
        data_keyword_argument="record",
        persistence_store=persistence,
        config=config,
        key_prefix=key_prefix,
    )
    def record_handler(record: SQSRecord) -> Any:
        body = json.loads(record.body)
        attempt = Attempt(
            key=str(key_path.search(body)),
            fence=0,
            message_id=record.message_id,
            takeover=False,
            record=None,
        )
        return process(body, attempt)

    def lambda_handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
        config.register_lambda_context(context)
        response = process_partial_response(
            event=event, record_handler=record_handler, processor=processor, context=context
        )
        return cast(dict[str, Any], response)

    return lambda_handler
