"""``once dlq`` run by a role that may read the DLQ but not change a message's visibility
ends with one line naming the permission it needs, never a traceback (proved by the
adversarial review of issue 42)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError
from moto import mock_aws

from oncecli import dlq
from oncecli.errors import CliError


class CannotChangeVisibility:
    """An SQS client under a role allowing ReceiveMessage but not ChangeMessageVisibility."""

    def __init__(self, sqs: Any) -> None:
        self._sqs = sqs

    def __getattr__(self, name: str) -> Any:
        return getattr(self._sqs, name)

    def change_message_visibility_batch(self, **request: Any) -> Any:
        raise ClientError(
            {
                "Error": {
                    "Code": "AccessDenied",
                    "Message": "User is not authorized to perform: sqs:changemessagevisibility",
                },
                "ResponseMetadata": {"HTTPStatusCode": 403},
            },
            "ChangeMessageVisibilityBatch",
        )


@pytest.fixture
def sqs() -> Iterator[Any]:
    with mock_aws():
        yield boto3.client("sqs", region_name="us-east-1")


def test_a_role_without_change_message_visibility_gets_the_permission_named(sqs: Any) -> None:
    url = sqs.create_queue(QueueName="orders-dlq")["QueueUrl"]
    for n in range(3):
        sqs.send_message(QueueUrl=url, MessageBody=f'{{"orderId": "o-{n}"}}')
    try:
        dlq.read(CannotChangeVisibility(sqs), url)
    except CliError as error:
        assert "sqs:ChangeMessageVisibility" in str(error)
    except ClientError as error:
        pytest.fail(
            f"once dlq let botocore's {error!r} escape (a traceback, exit 1) instead of a "
            "CliError naming sqs:ChangeMessageVisibility"
        )
    else:
        pytest.fail("the listing reported success although no message was made visible again")
