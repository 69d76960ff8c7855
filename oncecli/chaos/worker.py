"""One harness worker: a real process that polls the queue like the event source mapping,
runs one consumer under test with the probe and the client faults installed, and applies
AWS's partial batch response rules (``oncecli.localcloud.batchrules``).

A worker may be killed (SIGKILL) or stopped (SIGSTOP) by its own probe at any moment; its
in-flight messages then come back after the visibility timeout, as in Lambda.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import sys
import time
from dataclasses import dataclass
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from once import constants as c
from oncecli.aws import LOCAL_ACCOUNT, LOCAL_REGION, local_env
from oncecli.chaos.probe import History, Probe
from oncecli.chaos.retrytimes import NOT_DONE
from oncecli.chaos.traffic import HID
from oncecli.localcloud.batchrules import decide
from oncecli.localcloud.invocation import LambdaContext
from oncecli.localcloud.mapping import event_record


@dataclass(frozen=True)
class WorkerSpec:
    """Everything a worker process needs; plain data, so it crosses a spawn."""

    impl: str  # once, once-nobackoff, once-unfenced, powertools, naive
    worker: str
    seed: int
    sqs_endpoint: str
    dynamodb_endpoint: str
    queue_url: str
    dlq_url: str
    tables: dict[str, str]  # idempotency, ledger
    history_path: str
    rates: dict[str, float]
    skew_s: float
    pause_s: float
    timeout_s: float
    batch_size: int


def _skew_clock(skew_s: float) -> None:
    """Shift this process's wall clock (``time.time``) by ``skew_s`` seconds."""
    real = time.time
    time.time = lambda: real() + skew_s


def _business(history: History) -> Any:
    """The payments example's ``credit``, observed: every run and every ledger answer."""
    from payments.handler import credit

    def process(body: dict[str, Any], attempt: Any) -> Any:
        digest = hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()
        history.add("exec", key=str(body.get("paymentId")), hash=digest, message=attempt.message_id)
        if body.get("poison"):
            raise RuntimeError("poison payment: this account cannot be credited")
        result = credit(body, attempt)
        history.add("credit", key=body["paymentId"], applied=result["applied"])
        return result

    return process


def _handler(spec: WorkerSpec, process: Any) -> Any:
    table = spec.tables["idempotency"]
    if spec.impl.startswith("once"):
        from once.handler import make_handler

        handler = make_handler(
            process,
            key="paymentId",
            table_name=table,
            dlq_url=spec.dlq_url,
            key_prefix="payments",
            lease_margin_s=1,
            # once-nobackoff: failed and BUSY records wait for the queue's visibility timeout.
            backoff_base_s=None if spec.impl == "once-nobackoff" else c.DEFAULT_BACKOFF_BASE_S,
        )
        if spec.impl == "once-unfenced":
            import boto3
            from botocore.config import Config

            from oncecli.chaos.unfenced import UnfencedRecordStore

            # The same retries as the handler's own client: only the condition differs.
            config = Config(retries={"mode": "standard", "max_attempts": 3})
            client = boto3.client("dynamodb", config=config)
            handler.bind(store=UnfencedRecordStore(client, table, retention_s=handler.retention_s))
        return handler
    if spec.impl == "powertools":
        from oncecli.chaos.peers.powertools import make_handler as powertools_handler

        return powertools_handler(process, table_name=table)
    from oncecli.chaos.peers.naive import make_handler as naive_handler

    return naive_handler(process, table_name=table)


def run(spec: WorkerSpec) -> None:
    """The worker's main loop; returns only when the harness kills it."""
    os.environ.update(
        {
            **local_env(),
            "AWS_ENDPOINT_URL_DYNAMODB": spec.dynamodb_endpoint,
            "AWS_ENDPOINT_URL_SQS": spec.sqs_endpoint,
            "LEDGER_TABLE_NAME": spec.tables["ledger"],
            "POWERTOOLS_TRACE_DISABLED": "true",
            "POWERTOOLS_METRICS_DISABLED": "true",
            "POWERTOOLS_LOG_LEVEL": "ERROR",
            "POWERTOOLS_IDEMPOTENCY_DISABLED": "false",
        }
    )
    # The consumers' logs and metrics are not the report: keep the terminal for the harness.
    sys.stdout = open(os.devnull, "w")  # noqa: SIM115 - for the life of the process
    _skew_clock(spec.skew_s)
    rng = random.Random(f"{spec.seed}-{spec.worker}")
    history = History(spec.history_path, spec.worker)
    from oncecli.chaos.faults import Injector

    faults = Injector(None, rng, on_fault=lambda kind: history.add("fault", kind=kind))
    faults.throttle(spec.rates.get("throttle", 0.0), ("UpdateItem", "PutItem", "DeleteItem"))
    faults.lose_responses(spec.rates.get("lost_response", 0.0), ("UpdateItem", "PutItem"))
    Probe(history, spec.tables["idempotency"], spec.rates, spec.pause_s, rng).install()
    import boto3

    sqs: Any = boto3.client("sqs")
    handler = _handler(spec, _business(history))
    while True:
        try:
            messages = sqs.receive_message(
                QueueUrl=spec.queue_url,
                MaxNumberOfMessages=spec.batch_size,
                WaitTimeSeconds=1,
                MessageAttributeNames=["All"],
                AttributeNames=["All"],
            ).get("Messages", [])
        except (BotoCoreError, ClientError):
            # moto's server answers 500 now and then under load: poll again, as Lambda does.
            time.sleep(0.2)
            continue
        if not messages:
            continue
        history.add("deliver", count=len(messages))
        _invoke(spec, sqs, handler, messages, history)


def _invoke(
    spec: WorkerSpec, sqs: Any, handler: Any, messages: list[dict[str, Any]], history: History
) -> None:
    queue_arn = f"arn:aws:sqs:{LOCAL_REGION}:{LOCAL_ACCOUNT}:{spec.queue_url.rsplit('/', 1)[-1]}"
    event = {"Records": [event_record(m, queue_arn, LOCAL_REGION) for m in messages]}
    context = LambdaContext.starting_now(spec.impl, spec.timeout_s, memory_mb=256)
    by_id = {m["MessageId"]: m for m in messages}
    try:
        if spec.impl.startswith("once"):
            # once says how each record ended; a BUSY or FAILED one (Outcome "busy",
            # "failed") starts a retry time (``retrytimes``), its ack ends it.
            handled = handler.handle(event, context)
            response, error = handled.response, None
            for end in handled.records:
                if end.outcome in NOT_DONE:
                    history.add("retry", hid=_hid(by_id[end.message_id]), kind=str(end.outcome))
        else:
            response, error = handler(event, context), None
        response = json.loads(json.dumps(response))
    except Exception as raised:
        response, error = None, type(raised).__name__
    decision = decide([m["MessageId"] for m in messages], response, error=error)
    for message_id in decision.delete:
        message = by_id[message_id]
        try:
            sqs.delete_message(QueueUrl=spec.queue_url, ReceiptHandle=message["ReceiptHandle"])
        except ClientError as error:
            # The receipt is stale: the message was received again meanwhile.
            history.add("stale_receipt", code=error.response["Error"]["Code"])
            continue
        history.add("ack", hid=_hid(message))


def _hid(message: dict[str, Any]) -> str | None:
    return (message.get("MessageAttributes") or {}).get(HID, {}).get("StringValue")
