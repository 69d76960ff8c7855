"""A minimal Powertools SQS consumer module, as its docs write one: the cold-start baseline.

The cold-start benchmark imports this file as a top-level module in fresh interpreters,
beside ``payments.handler``. It is what a Lambda module written the documented way loads at
import: Logger, BatchProcessor, the idempotency utility and its persistence layer (which
creates its DynamoDB client at import).
"""

from __future__ import annotations

import json
import os
from typing import Any

from aws_lambda_powertools import Logger
from aws_lambda_powertools.utilities.batch import (
    BatchProcessor,
    EventType,
    process_partial_response,
)
from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord
from aws_lambda_powertools.utilities.idempotency import (
    DynamoDBPersistenceLayer,
    IdempotencyConfig,
    idempotent_function,
)

logger = Logger()
processor = BatchProcessor(event_type=EventType.SQS)
persistence = DynamoDBPersistenceLayer(table_name=os.getenv("IDEMPOTENCY_TABLE_NAME", "idem"))
config = IdempotencyConfig(event_key_jmespath="powertools_json(body).paymentId")


@idempotent_function(data_keyword_argument="record", persistence_store=persistence, config=config)
def record_handler(record: SQSRecord) -> Any:
    return json.loads(record.body)


@logger.inject_lambda_context
def lambda_handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    config.register_lambda_context(context)
    return process_partial_response(
        event=event, record_handler=record_handler, processor=processor, context=context
    )
