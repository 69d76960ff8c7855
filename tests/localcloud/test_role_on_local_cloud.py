"""Each function runs with its own role on the local cloud: a team's app in a folder of its
own, two stacks alike but for the grants. Business code stages a write on its ``Ledger``
(``attempt.write``); in ``Ungranted`` the consumer was never granted
that table, so the commit is refused as AWS refuses it (AccessDeniedException: the
transaction's Put needs dynamodb:PutItem on the ledger) and nothing lands; in ``Granted``
(``grant_staged_writes``) the same code completes its record and the entry lands. A second
consumer, ``Probe``, calls ``PutItem`` on the ledger itself: refused with DynamoDB's
AccessDeniedException and AWS's message in ``Ungranted``, sent in ``Granted``, and sent in
``Ungranted`` too by a worker started after a policy was put on its role through IAM.
"""

from __future__ import annotations

import json
import re
import time
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from once.models import Record
from oncecli.localcloud.mapping import Worker, event_record
from oncecli.testing.cloud import OnceCloud, StrippedResourceWarning
from tests.localcloud.helpers import write_project

HANDLER = """
import os

from once import make_handler


def credit(order, attempt):
    attempt.write({"Put": {
        "TableName": os.environ["LEDGER_TABLE"],
        "Item": {"id": {"S": order["orderId"]}, "amount": {"N": str(order["amount"])}},
    }})
    return {"credited": order["amount"]}


handler = make_handler(credit, key="orderId")
"""

PROBE = '''
import os

import boto3
from botocore.exceptions import ClientError
from once import make_handler


def probe(order, attempt):
    """Business code calling DynamoDB itself: what the role says of it is the result."""
    try:
        boto3.client("dynamodb").put_item(
            TableName=os.environ["LEDGER_TABLE"], Item={"id": {"S": "probe-" + order["probeId"]}}
        )
    except ClientError as error:
        refusal = error.response["Error"]
        return {"code": refusal["Code"], "message": refusal["Message"]}
    return {"code": None}


handler = make_handler(probe, key="probeId")
'''

APP = """
import aws_cdk as cdk
from aws_cdk import aws_dynamodb as dynamodb
from once_cdk import OnceConsumer, add_cli_outputs

app = cdk.App()
for name, granted in (("Ungranted", False), ("Granted", True)):
    stack = cdk.Stack(app, name)
    ledger = dynamodb.Table(
        stack, "Ledger",
        partition_key=dynamodb.Attribute(name="id", type=dynamodb.AttributeType.STRING),
        removal_policy=cdk.RemovalPolicy.DESTROY,
    )
    orders = OnceConsumer(
        stack, "Orders", code_dir="src", handler="shop.handler.handler", service_name="shop",
        timeout=cdk.Duration.seconds(3), environment={"LEDGER_TABLE": ledger.table_name},
    )
    probe = OnceConsumer(
        stack, "Probe", code_dir="src", handler="shop.probe.handler", service_name="probe",
        timeout=cdk.Duration.seconds(3), environment={"LEDGER_TABLE": ledger.table_name},
    )
    if granted:
        orders.grant_staged_writes(ledger)
        probe.grant_staged_writes(ledger, ["Put"])
    add_cli_outputs(orders)
app.synth()
"""


@pytest.fixture(scope="module")
def shop(tmp_path_factory: pytest.TempPathFactory) -> Iterator[OnceCloud]:
    project = tmp_path_factory.mktemp("roles") / "shop"
    write_project(
        project,
        {
            "src/shop/__init__.py": "",
            "src/shop/handler.py": HANDLER,
            "src/shop/probe.py": PROBE,
            "app.py": APP,
            "cdk.json": '{"app": "python3 app.py"}\n',
        },
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", StrippedResourceWarning)
        with OnceCloud(project, workers=1) as cloud:
            yield cloud


def _settled(
    cloud: OnceCloud, stack: str, key: str, consumer: str = "Orders", timeout_s: float = 60
) -> Record:
    """The record once it is no longer IN_PROGRESS (or missing)."""
    deadline = time.monotonic() + timeout_s
    record = None
    while time.monotonic() < deadline:
        record = cloud.record(stack, key, consumer=consumer)
        if record is not None and record.status != "IN_PROGRESS":
            return record
        time.sleep(0.2)
    raise AssertionError(f"{stack} {key}: still {record} after {timeout_s} s")


def _ledger(cloud: OnceCloud, stack: str) -> list[dict[str, Any]]:
    table = cloud.consumer(stack, "Orders").function.environment["LEDGER_TABLE"]
    items: list[dict[str, Any]] = cloud.client("dynamodb").scan(TableName=table)["Items"]
    return items


def _worker_log(cloud: OnceCloud, stack: str) -> str:
    assert cloud.cloud is not None
    path = Path(cloud.cloud.log_dir) / cloud.consumer(stack, "Orders").log_name
    return path.read_text() if path.is_file() else ""


def test_a_staged_write_on_a_table_the_role_was_not_granted_fails_its_commit(shop):
    shop.send("Ungranted", [{"orderId": "o-1", "amount": 5}], consumer="Orders")
    record = _settled(shop, "Ungranted", "o-1")

    assert record.status == "FAILED"
    assert "COMMIT_FAILED: commit canceled: AccessDeniedException" in (record.error or ""), record
    assert _ledger(shop, "Ungranted") == []  # nothing landed


def test_the_same_write_with_grant_staged_writes_is_processed(shop):
    shop.send("Granted", [{"orderId": "o-1", "amount": 5}], consumer="Orders")
    record = _settled(shop, "Granted", "o-1")

    assert record.status == "COMPLETED", record
    assert json.loads(record.result) == {"credited": 5}
    assert [item["id"]["S"] for item in _ledger(shop, "Granted")] == ["o-1"]
    assert "not authorized" not in _worker_log(shop, "Granted")


def test_business_code_s_own_call_is_refused_as_aws_refuses_it_and_allowed_once_granted(shop):
    for stack in ("Ungranted", "Granted"):
        shop.send(stack, [{"probeId": "p-1"}], consumer="Probe")
    refused = json.loads(_settled(shop, "Ungranted", "p-1", consumer="Probe").result)
    allowed = json.loads(_settled(shop, "Granted", "p-1", consumer="Probe").result)

    assert allowed == {"code": None}
    assert refused["code"] == "AccessDeniedException"
    ledger = shop.consumer("Ungranted", "Probe").function.environment["LEDGER_TABLE"]
    assert re.fullmatch(
        r"User: arn:aws:sts::\d{12}:assumed-role/[^/]+/[^ ]+ is not authorized to perform: "
        rf"dynamodb:PutItem on resource: arn:aws:dynamodb:us-east-1:\d{{12}}:table/{ledger} "
        "because no identity-based policy allows the dynamodb:PutItem action",
        refused["message"],
    ), refused["message"]
    assert [i["id"]["S"] for i in _ledger(shop, "Granted") if i["id"]["S"].startswith("probe")] == [
        "probe-p-1"
    ]


def test_a_policy_put_on_the_role_after_the_deploy_holds_for_a_worker_started_after_it(shop):
    consumer = shop.consumer("Ungranted", "Probe")
    function = consumer.function
    ledger = function.environment["LEDGER_TABLE"]
    role = shop.client("lambda").get_function_configuration(FunctionName=function.name)["Role"]
    shop.client("iam").put_role_policy(
        RoleName=role.rsplit("/", 1)[1],
        PolicyName="ledger-put",
        PolicyDocument=json.dumps(
            {
                "Version": "2012-10-17",
                "Statement": [
                    {
                        "Effect": "Allow",
                        "Action": "dynamodb:PutItem",
                        "Resource": f"arn:aws:dynamodb:us-east-1:123456789012:table/{ledger}",
                    }
                ],
            }
        ),
    )
    assert shop.cloud is not None
    log = str(Path(shop.cloud.log_dir) / "workers-role-probe.log")
    env = {**function.environment, **shop.cloud.worker_env(consumer)}  # as the mapping has it
    worker = Worker(function, env, log)
    worker.launch()
    try:
        worker.wait_ready()
        message = {
            "MessageId": "m-p-2",
            "ReceiptHandle": "r-p-2",
            "Body": json.dumps({"probeId": "p-2"}),
            "Attributes": {"ApproximateReceiveCount": "1", "SentTimestamp": "1"},
        }
        event = {"Records": [event_record(message, consumer.mapping.queue_arn, "us-east-1")]}
        response, error, fault = worker.invoke(event)
    finally:
        worker.close()

    assert (error, fault) == (None, None), Path(log).read_text()[-2000:]
    assert response == {"batchItemFailures": []}, Path(log).read_text()[-2000:]
    assert json.loads(_settled(shop, "Ungranted", "p-2", consumer="Probe").result) == {"code": None}
