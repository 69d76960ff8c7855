"""An outbox or a quarantine that could not send says why, in AWS's words and never in the
message's: the record's line carries the cause of ``owed`` (the error's class and AWS's
code, or a batch entry's ``Failed`` code), and a failed quarantine logs its cause, so that
an operator tells a missing permission from a deleted queue from a refused message
(docs/runbook.md, "Owed")."""

from __future__ import annotations

import json
from typing import Any

import pytest
from botocore.exceptions import ClientError

from once import constants as c
from once.models import Outcome
from once.outbox import Outbox
from once.quarantine import Quarantine

SECRET = "4111-1111-1111-1111"  # a value that must never reach a log line
ORDER = {"orderId": "o-1", "card": SECRET}


def lines(caplog: Any) -> list[dict[str, Any]]:
    """once's log lines as its logger emits them: the message and every extra key."""
    return [{**vars(r), "message": r.getMessage()} for r in caplog.records]


class Refusing:
    """An SQS or SNS client whose every call AWS refuses with ``code``."""

    def __init__(self, code: str) -> None:
        self._code = code

    def __getattr__(self, operation: str) -> Any:
        def refuse(**_: Any) -> Any:
            raise ClientError({"Error": {"Code": self._code, "Message": SECRET}}, operation)

        return refuse


class FailingEntries:
    """SQS answering a SendMessageBatch with every entry Failed."""

    def send_message_batch(self, *, QueueUrl: str, Entries: list[dict[str, Any]]) -> Any:
        failed = [
            {
                "Id": e["Id"],
                "Code": "KMS.AccessDeniedException",
                "SenderFault": True,
                "Message": SECRET,
            }
            for e in Entries
        ]
        return {"Successful": [], "Failed": failed}


def sending(aws: Any, notify_url: str) -> Any:
    def business(body: Any, attempt: Any) -> Any:
        attempt.send(notify_url, {"orderId": body["orderId"], "card": body["card"]})
        return {"ok": True}

    return business


@pytest.mark.parametrize(
    ("client", "cause"),
    [
        (Refusing("AccessDenied"), "ClientError (AccessDenied)"),
        (Refusing("AWS.SimpleQueueService.NonExistentQueue"), "NonExistentQueue"),
        (FailingEntries(), "Failed KMS.AccessDeniedException"),
    ],
    ids=["access-denied", "deleted-queue", "failed-entry"],
)
def test_an_owed_record_says_why_its_outbox_was_not_sent(
    aws, once_handler, sqs_event, caplog, client: Any, cause: str
) -> None:
    notify = aws.sqs.create_queue(QueueName="notify")["QueueUrl"]
    handler = once_handler(sending(aws, notify))
    handler.bind(outbox=Outbox(lambda service: client))

    [result] = handler.handle(sqs_event([ORDER]), None).records

    assert result.outcome is Outcome.OWED
    assert cause in (result.reason or "")
    logged = lines(caplog)
    assert SECRET not in json.dumps(logged, default=str)
    [warning] = [line for line in logged if line["message"].startswith("outbox not sent")]
    assert cause in warning["error"]
    [record_line] = [line for line in logged if line["message"] == "record owed"]
    assert cause in record_line["reason"]


def test_a_quarantine_that_could_not_send_says_why_and_the_record_comes_back(
    aws, once_handler, sqs_event, caplog
) -> None:
    handler = once_handler(lambda body, attempt: {"ok": True})
    handler.bind(quarantine=Quarantine(Refusing("AccessDenied"), aws.dlq_url))

    [result] = handler.handle(sqs_event(["not json " + SECRET]), None).records

    assert result.outcome is Outcome.FAILED
    logged = lines(caplog)
    assert SECRET not in json.dumps(logged, default=str)
    [warning] = [line for line in logged if line["message"].startswith("quarantine not sent")]
    assert (warning["reason"], warning["error"]) == (
        c.REASON_INVALID_JSON,
        "ClientError (AccessDenied)",
    )
