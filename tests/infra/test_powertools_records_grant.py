"""``OnceConsumer.grant_powertools_records``: every call the bridge to Powertools' records
makes (``once.powertools``: the claim's PutItem, the commit's transaction element, the staged
copy's read) is allowed by the synthesized role, judged as IAM judges it in ``once_env``;
without the grant, the bridge's first call is refused and the record fails, naming AWS's
code; and the grant never allows a delete."""

from __future__ import annotations

import json
import time
from typing import Any

import aws_cdk as cdk
import pytest
from aws_cdk import assertions
from aws_cdk import aws_dynamodb as dynamodb
from moto.iam.access_control import IAMPolicy, PermissionResult

from once import PermanentError, PowertoolsBridge, make_handler
from once import constants as c
from once.models import Outcome
from once.testing import OnceEnv
from once_cdk import OnceConsumer
from oncecli.localcloud.rolekit import role_of

ACCOUNT, REGION = "123456789012", "us-east-1"
POWERTOOLS = "subscriptions-idempotency"


def _template(tmp_path: Any, *, granted: bool) -> dict[str, Any]:
    (tmp_path / "shop").mkdir(exist_ok=True)
    (tmp_path / "shop" / "handler.py").write_text("lambda_handler = None\n")
    app = cdk.App(outdir=str(tmp_path / "cdk.out"))
    stack = cdk.Stack(app, "Shop", env=cdk.Environment(account=ACCOUNT, region=REGION))
    consumer = OnceConsumer(
        stack, "Renewals", code_dir=tmp_path, handler="shop.handler.lambda_handler",
        service_name="subscriptions",
    )  # fmt: skip
    table = dynamodb.Table.from_table_name(stack, "PowertoolsTable", POWERTOOLS)
    if granted:
        consumer.grant_powertools_records(table)
    return dict(assertions.Template.from_stack(stack).to_json())


def _logical(template: dict[str, Any], kind: str, prefix: str) -> str:
    return next(
        k for k, r in template["Resources"].items() if r["Type"] == kind and k.startswith(prefix)
    )


def _env_with_role(template: dict[str, Any]) -> OnceEnv:
    env = OnceEnv()
    env.__enter__()
    env.dynamodb.create_table(
        TableName=POWERTOOLS,
        BillingMode="PAY_PER_REQUEST",
        KeySchema=[{"AttributeName": "id", "KeyType": "HASH"}],
        AttributeDefinitions=[{"AttributeName": "id", "AttributeType": "S"}],
    )
    env.role = role_of(
        template,
        names={
            _logical(template, "AWS::DynamoDB::Table", "RenewalsTable"): env.table_name,
            _logical(template, "AWS::SQS::Queue", "RenewalsDlq"): env.dlq_url,
        },
    )
    return env


def _bridge() -> PowertoolsBridge:
    return PowertoolsBridge(
        table_name=POWERTOOLS,
        key_prefix="subscriptions-RenewFunction.app.renew",
        event_key_jmespath="powertools_json(body).renewalId",
    )


def _completed(renewal: str) -> dict[str, Any]:
    """The COMPLETED record the Powertools build left for ``renewal``."""
    event_record = {"body": json.dumps({"renewalId": renewal})}
    powertools = _bridge().record_for(event_record)
    assert powertools is not None
    return {
        **powertools.key(),
        "status": {"S": "COMPLETED"},
        "expiration": {"N": str(int(time.time()) + 3600)},
        "data": {"S": '"charged"'},
    }


@pytest.mark.parametrize("effects", ["any", "staged"])
def test_every_call_of_the_bridge_is_allowed_by_the_grant(tmp_path, effects):
    calls: list[str] = []

    def renew(body: dict[str, Any], attempt: Any) -> str:
        calls.append(body["renewalId"])
        if len(calls) > 1:  # a copy after the commit: a staged copy then reads both records
            raise PermanentError("this renewal is already charged")
        return "charged"

    env = _env_with_role(_template(tmp_path, granted=True))
    try:
        handler = make_handler(renew, key="renewalId", effects=effects, powertools=_bridge())
        first = env.deliver(handler, [{"renewalId": "r-1"}])
        again = env.deliver(handler, [{"renewalId": "r-1"}])
        items = env.dynamodb.scan(TableName=POWERTOOLS)["Items"]
        # A renewal the Powertools build completed: the claim's put is refused (two-phase),
        # or the copy that raised reads the Powertools record (staged).
        env.dynamodb.put_item(TableName=POWERTOOLS, Item=_completed("r-2"))
        before_deploy = env.deliver(handler, [{"renewalId": "r-2"}])
    finally:
        env.__exit__(None, None, None)
    assert first.outcomes == [Outcome.PROCESSED]
    assert again.outcomes == [Outcome.DUPLICATE]
    (item,) = items
    assert item["status"]["S"] == "COMPLETED"
    assert before_deploy.outcomes == [Outcome.DUPLICATE]


def test_without_the_grant_the_bridge_is_refused_and_says_so(tmp_path):
    env = _env_with_role(_template(tmp_path, granted=False))
    try:
        handler = make_handler(
            lambda body, attempt: "charged", key="renewalId", powertools=_bridge()
        )
        delivered = env.deliver(handler, [{"renewalId": "r-1"}])
        record = env.record("r-1")
    finally:
        env.__exit__(None, None, None)
    assert delivered.outcomes == [Outcome.FAILED]
    (result,) = delivered.results
    assert result is not None
    assert result.reason == "ClientError (AccessDeniedException, HTTP 400)"
    # once's own claim is released at once: the next copy may claim the key.
    assert record is not None and record.status == c.STATUS_FAILED


def test_the_grant_never_allows_a_delete_nor_another_table(tmp_path):
    template = _template(tmp_path, granted=True)
    arn = f"arn:aws:dynamodb:{REGION}:{ACCOUNT}:table/{POWERTOOLS}"
    statements = [
        statement
        for resource in template["Resources"].values()
        if resource["Type"] == "AWS::IAM::Policy"
        for statement in resource["Properties"]["PolicyDocument"]["Statement"]
        if POWERTOOLS in json.dumps(statement["Resource"])
    ]
    assert statements
    resolved = [{**s, "Resource": arn} for s in statements]
    policy = IAMPolicy(json.dumps({"Version": "2012-10-17", "Statement": resolved}))
    for action in ("dynamodb:GetItem", "dynamodb:PutItem", "dynamodb:UpdateItem"):
        assert policy.is_action_permitted(action, arn) is PermissionResult.PERMITTED
    for action in ("dynamodb:DeleteItem", "dynamodb:Scan", "dynamodb:BatchWriteItem"):
        assert policy.is_action_permitted(action, arn) is not PermissionResult.PERMITTED
