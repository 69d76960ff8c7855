"""A team's renewals consumer twice: as it ran on Powertools' idempotency utility (the
documented ``@idempotent_function`` inside ``BatchProcessor`` on ``DynamoDBPersistenceLayer``),
and as it runs on once with the bridge to those records. Both charge a renewal the same way:
one ``ADD charges :one`` on the ledger, so that a test counts every charge either made.

The Powertools side is Powertools' own code, as its documentation writes it
(https://docs.powertools.aws.dev/lambda/python/latest/utilities/idempotency/, "Batch
integration"); nothing of its format is copied here.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from aws_lambda_powertools.utilities.batch import (
    BatchProcessor,
    EventType,
    process_partial_response,
)
from aws_lambda_powertools.utilities.idempotency import (
    DynamoDBPersistenceLayer,
    IdempotencyConfig,
    idempotent_function,
)

from once import PowertoolsBridge, make_handler
from once.handler import Handler

#: The Powertools table (its default key attribute, ``id``).
POWERTOOLS_TABLE = "powertools-idempotency"
#: The old function's name, as Lambda set it (``AWS_LAMBDA_FUNCTION_NAME``).
OLD_FUNCTION = "subscriptions-RenewFunction-9XW1"
KEY_JMESPATH = "powertools_json(body).renewalId"


def create_powertools_table(dynamodb: Any) -> None:
    dynamodb.create_table(
        TableName=POWERTOOLS_TABLE,
        BillingMode="PAY_PER_REQUEST",
        KeySchema=[{"AttributeName": "id", "KeyType": "HASH"}],
        AttributeDefinitions=[{"AttributeName": "id", "AttributeType": "S"}],
    )


def charge_on(dynamodb: Any, ledger: str, renewal: str) -> None:
    """The charge itself, as the Powertools build makes it: one plain write."""
    dynamodb.update_item(**charge_element(ledger, renewal))


def charge_element(ledger: str, renewal: str) -> dict[str, Any]:
    return {
        "TableName": ledger,
        "Key": {"id": {"S": f"charge#{renewal}"}},
        "UpdateExpression": "ADD charges :one",
        "ExpressionAttributeValues": {":one": {"N": "1"}},
    }


def charges(dynamodb: Any, ledger: str, renewal: str) -> int:
    item = dynamodb.get_item(
        TableName=ledger, Key={"id": {"S": f"charge#{renewal}"}}, ConsistentRead=True
    ).get("Item")
    return int(item["charges"]["N"]) if item else 0


@dataclass
class PowertoolsBuild:
    """The renewals consumer on Powertools: ``handler(event, context)`` is its Lambda
    handler; ``key_prefix`` what precedes ``#`` in the ids it writes."""

    handler: Callable[[dict[str, Any], Any], dict[str, Any]]
    key_prefix: str


def powertools_build(
    dynamodb: Any,
    ledger: str,
    *,
    validation: str = "",
    expires_after_seconds: int = 3600,
) -> PowertoolsBuild:
    persistence = DynamoDBPersistenceLayer(table_name=POWERTOOLS_TABLE, boto3_client=dynamodb)
    config = IdempotencyConfig(
        event_key_jmespath=KEY_JMESPATH,
        payload_validation_jmespath=validation,
        expires_after_seconds=expires_after_seconds,
    )
    processor = BatchProcessor(event_type=EventType.SQS)

    @idempotent_function(
        data_keyword_argument="record", config=config, persistence_store=persistence
    )
    def renew(record: Any) -> dict[str, Any]:
        body = json.loads(record.body)
        charge_on(dynamodb, ledger, body["renewalId"])
        return {"renewal": body["renewalId"], "charged": body["amount"]}

    def record_handler(record: Any) -> Any:
        return renew(record=record)

    def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
        config.register_lambda_context(context)
        return process_partial_response(
            event=event, record_handler=record_handler, processor=processor, context=context
        )

    return PowertoolsBuild(handler, f"{OLD_FUNCTION}.{renew.__module__}.{renew.__qualname__}")


def powertools_holds(
    dynamodb: Any, build: PowertoolsBuild, record: dict[str, Any], remaining_ms: int
) -> None:
    """The Powertools build takes ``record``'s record INPROGRESS with its own persistence
    layer, as its handler does before it runs the function (whose invocation then dies)."""
    layer = DynamoDBPersistenceLayer(table_name=POWERTOOLS_TABLE, boto3_client=dynamodb)
    layer.configure(IdempotencyConfig(event_key_jmespath=KEY_JMESPATH), key_prefix=build.key_prefix)
    layer.save_inprogress(data=record, remaining_time_in_millis=remaining_ms)


def bridge(build: PowertoolsBuild, *, validation: str = "", **more: Any) -> PowertoolsBridge:
    """The bridge a team writes from its Powertools configuration."""
    return PowertoolsBridge(
        table_name=POWERTOOLS_TABLE,
        key_prefix=build.key_prefix,
        event_key_jmespath=KEY_JMESPATH,
        payload_validation_jmespath=validation,
        **more,
    )


def once_build(
    ledger: str,
    table: str,
    powertools: PowertoolsBridge,
    *,
    effects: str = "any",
    key_prefix: str = "subscriptions",
    **more: Any,
) -> Handler:
    """The renewals consumer on once: the charge is staged with the record (both modes)."""

    def renew(body: dict[str, Any], attempt: Any) -> dict[str, Any]:
        attempt.write({"Update": charge_element(ledger, body["renewalId"])})
        return {"renewal": body["renewalId"], "charged": body["amount"]}

    return make_handler(
        renew,
        key="renewalId",
        table_name=table,
        key_prefix=key_prefix,
        effects=effects,  # type: ignore[arg-type]
        powertools=powertools,
        **more,
    )
