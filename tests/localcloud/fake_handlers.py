"""Handlers for the worker tests: each misbehaves in one way Lambda must survive."""

import os
import time


def ok(event, context):
    return {
        "batchItemFailures": [],
        "remaining": context.get_remaining_time_in_millis(),
        "name": context.function_name,
        "env": os.environ.get("FAKE_ENV"),
    }


def slow(event, context):
    time.sleep(30)


def crash(event, context):
    os._exit(3)


def raises(event, context):
    raise RuntimeError("boom")


def not_json(event, context):
    return {1, 2}


def _history(line: str) -> None:
    with open(os.environ["HISTORY"], "a") as out:
        out.write(line + "\n")


def back_off_one_second(event, context):
    """Fails every record on its first delivery and asks SQS to show it again in 1 s."""
    import boto3

    sqs = boto3.client("sqs")
    failures = []
    for record in event["Records"]:
        count = int(record["attributes"]["ApproximateReceiveCount"])
        _history(f"{record['body']} {count}")
        if count == 1:
            sqs.change_message_visibility(
                QueueUrl=os.environ["QUEUE_URL"],
                ReceiptHandle=record["receiptHandle"],
                VisibilityTimeout=1,
            )
            failures.append({"itemIdentifier": record["messageId"]})
    return {"batchItemFailures": failures}


def fifo_fail_a2_once(event, context):
    """Records in order; A2 fails its first time, and with it the rest of its group."""
    failures, failed_groups = [], set()
    for record in event["Records"]:
        group = record["attributes"]["MessageGroupId"]
        first_time = int(record["attributes"]["ApproximateReceiveCount"]) == 1
        if group in failed_groups or (record["body"] == "A2" and first_time):
            failed_groups.add(group)
            failures.append({"itemIdentifier": record["messageId"]})
            continue
        _history(record["body"])
    return {"batchItemFailures": failures}
