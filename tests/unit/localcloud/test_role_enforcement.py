"""Each function runs with its own role: a call is judged by what the synthesized template
grants the function's role, action by action as IAM authorizes the API (each
TransactWriteItems element on its table, a batch as its single action), by moto's IAM
policy engine, and refused with the service's own AccessDenied error, as botocore raises it.

The role is an ``OnceConsumer``'s, synthesized once for the module: its idempotency table,
its queues, a ``Ledger`` granted every staged operation, an ``Audit`` table granted Put and
Update only (no ConditionCheck), an ``Events`` topic it may publish to.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import aws_cdk as cdk
import botocore.session
import pytest
from aws_cdk import assertions
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_sns as sns
from botocore.exceptions import ClientError, ParamValidationError
from botocore.stub import Stubber
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from once import constants as c
from once_cdk import OnceConsumer
from oncecli.localcloud.rolekit import Check, RolePolicy, checks, enforce, role_of

ACCOUNT, REGION = "123456789012", "us-east-1"
PRINCIPAL = f"arn:aws:sts::{ACCOUNT}:assumed-role/OrdersRole/orders-fn"
QUEUE_URL = f"https://sqs.{REGION}.amazonaws.com/{ACCOUNT}/orders-queue"
DLQ_URL = f"https://sqs.{REGION}.amazonaws.com/{ACCOUNT}/orders-dlq"
TOPIC_ARN = f"arn:aws:sns:{REGION}:{ACCOUNT}:events"
OTHER_TOPIC_ARN = f"arn:aws:sns:{REGION}:{ACCOUNT}:elsewhere"


def _arn(table: str) -> str:
    return f"arn:aws:dynamodb:{REGION}:{ACCOUNT}:table/{table}"


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    base = tmp_path_factory.mktemp("role")
    (base / "shop").mkdir()
    (base / "shop" / "handler.py").write_text("lambda_handler = None\n")
    app = cdk.App(outdir=str(base / "cdk.out"))
    stack = cdk.Stack(app, "Shop", env=cdk.Environment(account=ACCOUNT, region=REGION))
    consumer = OnceConsumer(
        stack, "Orders", code_dir=base, handler="shop.handler.lambda_handler",
        service_name="shop",
    )  # fmt: skip
    key = dynamodb.Attribute(name=c.PARTITION_KEY, type=dynamodb.AttributeType.STRING)
    ledger = dynamodb.Table(stack, "Ledger", table_name="Ledger", partition_key=key)
    audit = dynamodb.Table(stack, "Audit", table_name="Audit", partition_key=key)
    consumer.grant_staged_writes(ledger)
    consumer.grant_staged_writes(audit, ["Put", "Update"])
    topic = sns.Topic(stack, "Events", topic_name="events")
    topic.grant_publish(consumer.function)
    return dict(assertions.Template.from_stack(stack).to_json())


def _logical(template: dict[str, Any], kind: str, prefix: str) -> str:
    return next(
        k for k, r in template["Resources"].items() if r["Type"] == kind and k.startswith(prefix)
    )


@pytest.fixture(scope="module")
def role(template: dict[str, Any]) -> RolePolicy:
    names = {
        _logical(template, "AWS::SQS::Queue", "OrdersQueue"): QUEUE_URL,
        _logical(template, "AWS::SQS::Queue", "OrdersDlq"): DLQ_URL,
        _logical(template, "AWS::DynamoDB::Table", "OrdersTable"): "orders-records",
        _logical(template, "AWS::IAM::Role", "OrdersRole"): "OrdersRole",
        _logical(template, "AWS::Lambda::Function", "OrdersFunction"): "orders-fn",
    }
    policy = role_of(template, names=names)
    assert policy.notes == ()  # every grant resolved
    return policy


def _transaction(*elements: tuple[str, str]) -> dict[str, Any]:
    return {"TransactItems": [{kind: {"TableName": table}} for kind, table in elements]}


# --- DynamoDB ----------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["Put", "Update", "Delete", "ConditionCheck"])
def test_each_staged_element_is_allowed_on_a_table_granted_with_grant_staged_writes(role, kind):
    call = _transaction(("Update", "orders-records"), (kind, "Ledger"))
    assert role.authorize("dynamodb", "TransactWriteItems", call) is None


def test_a_condition_check_on_a_table_granted_put_and_update_only_is_refused(role):
    allowed = _transaction(("Update", "orders-records"), ("Put", "Audit"), ("Update", "Audit"))
    assert role.authorize("dynamodb", "TransactWriteItems", allowed) is None  # the control

    refused = _transaction(("Update", "orders-records"), ("ConditionCheck", "Audit"))
    denial = role.authorize("dynamodb", "TransactWriteItems", refused)
    assert denial is not None
    assert denial.check == Check("dynamodb:ConditionCheckItem", _arn("Audit"))
    assert (denial.code, denial.status) == ("AccessDeniedException", 400)
    assert denial.message == (
        f"User: {PRINCIPAL} is not authorized to perform: dynamodb:ConditionCheckItem on "
        f"resource: {_arn('Audit')} because no identity-based policy allows the "
        "dynamodb:ConditionCheckItem action"
    )


def test_once_s_own_record_write_and_read_are_allowed_and_a_delete_is_not(role):
    record = {"TableName": "orders-records"}
    assert role.authorize("dynamodb", "UpdateItem", record) is None
    assert role.authorize("dynamodb", "GetItem", record) is None  # a staged copy's one read
    denial = role.authorize("dynamodb", "DeleteItem", record)
    assert denial is not None
    assert denial.check == Check("dynamodb:DeleteItem", _arn("orders-records"))


def test_a_batch_write_needs_batch_write_item_which_grant_staged_writes_does_not_give(role):
    call = {"RequestItems": {"Ledger": [{"PutRequest": {"Item": {}}}]}}
    denial = role.authorize("dynamodb", "BatchWriteItem", call)
    assert denial is not None and denial.check == Check("dynamodb:BatchWriteItem", _arn("Ledger"))
    assert role.authorize("dynamodb", "PutItem", {"TableName": "Ledger"}) is None  # the control


def test_a_query_on_an_index_is_judged_on_the_index():
    assert checks("dynamodb", "Query", {"TableName": "T", "IndexName": "byDate"}) == [
        Check("dynamodb:Query", _arn("T") + "/index/byDate")
    ]
    assert checks("dynamodb", "Scan", {"TableName": "T"}) == [Check("dynamodb:Scan", _arn("T"))]


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    elements=st.lists(
        st.tuples(
            st.sampled_from(["Put", "Update", "Delete", "ConditionCheck"]),
            st.sampled_from(["Ledger", "Audit"]),
        ),
        min_size=1,
        max_size=25,
    )
)
def test_a_transaction_is_allowed_exactly_when_each_element_s_action_is_granted_on_its_table(
    role, elements
):
    granted = {"Ledger": {"Put", "Update", "Delete", "ConditionCheck"}, "Audit": {"Put", "Update"}}
    expected = all(kind in granted[table] for kind, table in elements)
    denial = role.authorize("dynamodb", "TransactWriteItems", _transaction(*elements))
    assert (denial is None) == expected
    if denial is not None:  # the first element refused is named
        kind, table = next((k, t) for k, t in elements if k not in granted[t])
        action = {"Put": "PutItem", "Update": "UpdateItem", "Delete": "DeleteItem",
                  "ConditionCheck": "ConditionCheckItem"}[kind]  # fmt: skip
        assert denial.check == Check(f"dynamodb:{action}", _arn(table))


# --- SQS, SNS, CloudWatch ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("operation", "action", "allowed_on", "refused_on"),
    [
        ("SendMessage", "sqs:SendMessage", DLQ_URL, QUEUE_URL),
        ("SendMessageBatch", "sqs:SendMessage", DLQ_URL, QUEUE_URL),
        ("DeleteMessageBatch", "sqs:DeleteMessage", QUEUE_URL, DLQ_URL),
        ("ChangeMessageVisibilityBatch", "sqs:ChangeMessageVisibility", QUEUE_URL, DLQ_URL),
        ("ReceiveMessage", "sqs:ReceiveMessage", QUEUE_URL, DLQ_URL),
    ],
)
def test_an_sqs_call_is_judged_as_its_action_on_the_queue_of_its_url(
    role, operation, action, allowed_on, refused_on
):
    assert role.authorize("sqs", operation, {"QueueUrl": allowed_on}) is None
    denial = role.authorize("sqs", operation, {"QueueUrl": refused_on})
    assert denial is not None
    queue = f"arn:aws:sqs:{REGION}:{ACCOUNT}:{refused_on.rsplit('/', 1)[1]}"
    assert denial.check == Check(action, queue)
    assert (denial.code, denial.status) == ("AccessDenied", 403)
    # SQS spells the action in lower case in its message.
    assert f"not authorized to perform: {action.lower()} on resource: {queue}" in denial.message


@pytest.mark.parametrize("operation", ["Publish", "PublishBatch"])
def test_a_publish_is_judged_as_sns_publish_on_its_topic(role, operation):
    assert role.authorize("sns", operation, {"TopicArn": TOPIC_ARN}) is None
    denial = role.authorize("sns", operation, {"TopicArn": OTHER_TOPIC_ARN})
    assert denial is not None and denial.check == Check("sns:Publish", OTHER_TOPIC_ARN)
    assert (denial.code, denial.status) == ("AuthorizationError", 403)
    assert "perform: SNS:Publish on resource: " + OTHER_TOPIC_ARN in denial.message


def test_put_metric_data_has_no_resource_and_the_consumer_s_role_does_not_grant_it(role):
    denial = role.authorize("cloudwatch", "PutMetricData", {"Namespace": "Shop"})
    assert denial is not None and denial.check == Check("cloudwatch:PutMetricData", "*")
    assert (denial.code, denial.status) == ("AccessDenied", 403)
    assert denial.message == (
        f"User: {PRINCIPAL} is not authorized to perform: cloudwatch:PutMetricData because no "
        "identity-based policy allows the cloudwatch:PutMetricData action"
    )
    granted = _policy({"Effect": "Allow", "Action": "cloudwatch:PutMetricData", "Resource": "*"})
    assert granted.authorize("cloudwatch", "PutMetricData", {"Namespace": "Shop"}) is None


# --- the policy engine's rules -------------------------------------------------------------------


def _policy(*statements: dict[str, Any]) -> RolePolicy:
    document = json.dumps({"Version": "2012-10-17", "Statement": list(statements)})
    return RolePolicy("OrdersRole", (document,), session_name="orders-fn")


def test_an_explicit_deny_wins_over_an_allow():
    allow = {"Effect": "Allow", "Action": "dynamodb:*", "Resource": "*"}
    deny = {"Effect": "Deny", "Action": "dynamodb:DeleteItem", "Resource": _arn("Ledger")}
    policy = _policy(allow, deny)
    assert policy.authorize("dynamodb", "DeleteItem", {"TableName": "Other"}) is None
    denial = policy.authorize("dynamodb", "DeleteItem", {"TableName": "Ledger"})
    assert denial is not None and denial.message.endswith(
        "with an explicit deny in an identity-based policy"
    )


def test_actions_match_without_case_and_resources_with_iam_s_wildcards():
    policy = _policy(
        {"Effect": "Allow", "Action": "DynamoDB:putitem", "Resource": _arn("Ledger-?")},
    )
    assert policy.authorize("dynamodb", "PutItem", {"TableName": "Ledger-1"}) is None
    assert policy.authorize("dynamodb", "PutItem", {"TableName": "Ledger-12"}) is not None
    assert policy.authorize("dynamodb", "PutItem", {"TableName": "LedgerX1"}) is not None


def test_a_service_without_rules_is_judged_as_its_operation_on_any_resource():
    assert checks("secretsmanager", "GetSecretValue", {"SecretId": "db"}) == [
        Check("secretsmanager:GetSecretValue", "*")
    ]
    assert _policy().authorize("secretsmanager", "GetSecretValue", {"SecretId": "db"})
    wide = _policy({"Effect": "Allow", "Action": "secretsmanager:GetSecretValue", "Resource": "*"})
    assert wide.authorize("secretsmanager", "GetSecretValue", {"SecretId": "db"}) is None


def test_get_caller_identity_is_never_refused():
    assert _policy().authorize("sts", "GetCallerIdentity", {}) is None
    assert _policy().authorize("sts", "AssumeRole", {"RoleArn": "arn:aws:iam::1:role/r"})


def test_an_aws_managed_policy_grants_what_its_document_does():
    template = {
        "Resources": {
            "Role": {
                "Type": "AWS::IAM::Role",
                "Properties": {
                    "ManagedPolicyArns": [
                        {
                            "Fn::Join": [
                                "",
                                [
                                    "arn:",
                                    {"Ref": "AWS::Partition"},
                                    ":iam::aws:policy/service-role/AWSLambdaBasicExecutionRole",
                                ],
                            ]
                        }
                    ]
                },
            },
            "Fn": {
                "Type": "AWS::Lambda::Function",
                "Properties": {"Role": {"Fn::GetAtt": ["Role", "Arn"]}},
            },
        }
    }
    policy = role_of(template)
    logs = {"logGroupName": "/aws/lambda/fn", "logStreamName": "s"}
    assert policy.authorize("logs", "PutLogEvents", logs) is None
    assert policy.authorize("logs", "DeleteLogGroup", logs) is not None
    assert policy.authorize("dynamodb", "PutItem", {"TableName": "Ledger"}) is not None


# --- enforced on every client of the process -----------------------------------------------------


def _client(service: str) -> Any:
    session = botocore.session.get_session()
    return session.create_client(
        service, region_name=REGION, aws_access_key_id="x", aws_secret_access_key="x"
    )


def _condition_check(table: str) -> dict[str, Any]:
    check = {"TableName": table, "Key": {"id": {"S": "a"}}, "ConditionExpression": "size(id) > :n"}
    return {"TransactItems": [{"ConditionCheck": {**check, "ExpressionAttributeValues":
                                                  {":n": {"N": "0"}}}}]}  # fmt: skip


def test_a_refused_call_raises_the_service_s_client_error_and_an_allowed_one_is_sent(role):
    ddb = _client("dynamodb")
    with Stubber(ddb) as stub, enforce(role):
        stub.add_response("transact_write_items", {})
        stub.add_response("transact_write_items", {})  # Stubber's check: not consumed
        ddb.transact_write_items(**_condition_check("Ledger"))  # the control: sent (stubbed)
        with pytest.raises(ClientError) as raised:
            ddb.transact_write_items(**_condition_check("Audit"))
    error = raised.value.response["Error"]
    assert error["Code"] == "AccessDeniedException"
    assert raised.value.response["ResponseMetadata"]["HTTPStatusCode"] == 400
    assert "dynamodb:ConditionCheckItem on resource: " + _arn("Audit") in error["Message"]
    assert raised.value.operation_name == "TransactWriteItems"


def test_a_request_botocore_refuses_is_refused_by_botocore_first(role):
    ddb = _client("dynamodb")
    with enforce(role), pytest.raises(ParamValidationError):
        ddb.transact_write_items(**_transaction(("ConditionCheck", "Audit")))


def test_a_presigned_url_is_not_judged_when_it_is_made(role):
    s3 = _client("s3")
    with enforce(role):
        assert s3.generate_presigned_url("get_object", Params={"Bucket": "b", "Key": "k"})
        with pytest.raises(ClientError) as raised:
            s3.get_object(Bucket="b", Key="k")
    assert raised.value.response["Error"]["Code"] == "AccessDenied"


def test_sns_s_refusal_is_its_modeled_authorization_error(role):
    client = _client("sns")
    with enforce(role), pytest.raises(client.exceptions.AuthorizationErrorException):
        client.publish(TopicArn=OTHER_TOPIC_ARN, Message="m")


def test_the_role_is_no_longer_enforced_once_the_block_ends(role):
    client = _client("sqs")
    with Stubber(client) as stub:
        stub.add_response("send_message", {"MessageId": "1", "MD5OfMessageBody": "x"})
        with enforce(role), pytest.raises(ClientError):
            client.send_message(QueueUrl=QUEUE_URL, MessageBody="m")
        client.send_message(QueueUrl=QUEUE_URL, MessageBody="m")  # after: sent (stubbed)


def test_the_exactly_mapped_operations(tmp_path: Path):
    """The table of the report: operation to what IAM checks."""
    assert checks("dynamodb", "TransactGetItems", _transaction(("Get", "Ledger"))) == [
        Check("dynamodb:GetItem", _arn("Ledger"))
    ]
    assert checks("sqs", "GetQueueUrl", {"QueueName": "q"}) == [
        Check("sqs:GetQueueUrl", f"arn:aws:sqs:{REGION}:{ACCOUNT}:q")
    ]
    assert checks("sns", "PublishBatch", {"TopicArn": TOPIC_ARN}) == [
        Check("sns:Publish", TOPIC_ARN)
    ]
    assert checks("s3", "GetObject", {"Bucket": "b", "Key": "k/1"}) == [
        Check("s3:GetObject", "arn:aws:s3:::b/k/1")
    ]
    assert checks("s3", "ListObjectsV2", {"Bucket": "b"}) == [
        Check("s3:ListBucket", "arn:aws:s3:::b")
    ]


# --- once_env with the function's role ---------------------------------------------------------


def test_once_env_with_the_role_refuses_a_staged_write_the_role_lacks_and_lands_nothing(
    template,
):
    from once import make_handler
    from once.models import Outcome
    from once.testing import OnceEnv

    def stage(table: str, kind: str) -> Any:
        def business(body: dict[str, Any], attempt: Any) -> str:
            attempt.write(
                {kind: {"TableName": table, "Key": {c.PARTITION_KEY: {"S": body["orderId"]}},
                        "ConditionExpression": "attribute_not_exists(#k)",
                        "ExpressionAttributeNames": {"#k": c.PARTITION_KEY}}}
            )  # fmt: skip
            return "staged"

        return make_handler(business, key="orderId")

    with OnceEnv() as env:
        for table in ("Ledger", "Audit"):
            env.dynamodb.create_table(
                TableName=table,
                BillingMode="PAY_PER_REQUEST",
                KeySchema=[{"AttributeName": c.PARTITION_KEY, "KeyType": "HASH"}],
                AttributeDefinitions=[{"AttributeName": c.PARTITION_KEY, "AttributeType": "S"}],
            )
        env.role = role_of(
            template,
            names={
                _logical(template, "AWS::DynamoDB::Table", "OrdersTable"): env.table_name,
                _logical(template, "AWS::SQS::Queue", "OrdersDlq"): env.dlq_url,
            },
        )

        granted = env.deliver(stage("Ledger", "ConditionCheck"), [{"orderId": "o-1"}])
        refused = env.deliver(stage("Audit", "ConditionCheck"), [{"orderId": "o-2"}])

        assert granted.outcomes == [Outcome.PROCESSED]  # the control
        assert refused.outcomes == [Outcome.FAILED]
        record = env.record("o-2")
        assert record is not None and record.status == "FAILED"
        assert "AccessDeniedException" in (record.error or "")


def test_once_env_with_the_role_lets_a_staged_duplicate_read_its_record(template):
    """Under effects="staged", a copy whose business code raised a PermanentError reads its
    record before it is quarantined: with the function's role, that read is granted, and a
    duplicate is acknowledged instead of quarantined."""
    from once import PermanentError, make_handler
    from once.models import Outcome
    from once.testing import OnceEnv

    runs: list[str] = []

    def business(body: dict[str, Any], attempt: Any) -> str:
        runs.append(body["orderId"])
        if len(runs) > 1:
            raise PermanentError("the order is closed now")
        return "done"

    with OnceEnv() as env:
        env.role = role_of(
            template,
            names={
                _logical(template, "AWS::DynamoDB::Table", "OrdersTable"): env.table_name,
                _logical(template, "AWS::SQS::Queue", "OrdersDlq"): env.dlq_url,
            },
        )
        handler = make_handler(business, key="orderId", effects="staged")

        assert env.deliver(handler, [{"orderId": "o-1"}]).outcomes == [Outcome.PROCESSED]
        assert env.deliver(handler, [{"orderId": "o-1"}]).outcomes == [Outcome.DUPLICATE]
        assert env.dlq_messages() == []


# --- calls IAM authorizes under other actions than their operation's name ----------------------
# Both directions: what AWS takes is taken, what AWS refuses is refused.


@pytest.mark.parametrize(
    ("statement", "action", "resource"),
    [
        ('SELECT * FROM "Ledger" WHERE id = ?', "PartiQLSelect", _arn("Ledger")),
        ('select a from Ledger."byAccount"', "PartiQLSelect", _arn("Ledger") + "/index/byAccount"),
        ("INSERT INTO \"Ledger\" VALUE {'id': 'x'}", "PartiQLInsert", _arn("Ledger")),
        ('UPDATE "Ledger" SET n = 1 WHERE id = ?', "PartiQLUpdate", _arn("Ledger")),
        ('DELETE FROM "Ledger" WHERE id = ?', "PartiQLDelete", _arn("Ledger")),
    ],
)
def test_partiql_is_judged_by_its_verb_on_the_table_it_names(
    statement: str, action: str, resource: str
) -> None:
    """IAM authorizes PartiQL by verb (dynamodb:PartiQLSelect, ...) on the table or index
    (https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/ql-iam.html)."""
    assert checks("dynamodb", "ExecuteStatement", {"Statement": statement}) == [
        Check(f"dynamodb:{action}", resource)
    ]
    granted = _policy({"Effect": "Allow", "Action": f"dynamodb:{action}", "Resource": resource})
    assert granted.authorize("dynamodb", "ExecuteStatement", {"Statement": statement}) is None
    other = _policy({"Effect": "Allow", "Action": "dynamodb:ExecuteStatement", "Resource": "*"})
    assert other.authorize("dynamodb", "ExecuteStatement", {"Statement": statement}) is not None


def test_a_partiql_transaction_needs_each_statement_s_action() -> None:
    params = {
        "TransactStatements": [
            {"Statement": 'UPDATE "Ledger" SET n = 1 WHERE id = ?'},
            {"Statement": "INSERT INTO \"Audit\" VALUE {'id': 'x'}"},
        ]
    }
    update = {"Effect": "Allow", "Action": "dynamodb:PartiQLUpdate", "Resource": _arn("Ledger")}
    insert = {"Effect": "Allow", "Action": "dynamodb:PartiQLInsert", "Resource": _arn("Audit")}
    assert _policy(update, insert).authorize("dynamodb", "ExecuteTransaction", params) is None
    assert _policy(update).authorize("dynamodb", "ExecuteTransaction", params) is not None


BUCKET_OBJECTS = "arn:aws:s3:::reports/*"


@pytest.mark.parametrize(
    "operation", ["CreateMultipartUpload", "UploadPart", "CompleteMultipartUpload"]
)
def test_every_step_of_a_multipart_upload_is_authorized_as_put_object(operation: str) -> None:
    """ "Multipart upload API and permissions": s3:PutObject for each step
    (https://docs.aws.amazon.com/AmazonS3/latest/userguide/mpuoverview.html): CDK's
    grant_put is enough for upload_fileobj past its threshold."""
    params = {"Bucket": "reports", "Key": "r.csv", "UploadId": "u", "PartNumber": 1}
    put = _policy({"Effect": "Allow", "Action": "s3:PutObject", "Resource": BUCKET_OBJECTS})
    assert put.authorize("s3", operation, params) is None
    assert _policy().authorize("s3", operation, params) is not None


def test_list_parts_is_authorized_as_list_multipart_upload_parts() -> None:
    params = {"Bucket": "reports", "Key": "r.csv", "UploadId": "u"}
    assert checks("s3", "ListParts", params) == [
        Check("s3:ListMultipartUploadParts", "arn:aws:s3:::reports/r.csv")
    ]


def test_a_versioned_get_needs_get_object_version_and_not_get_object() -> None:
    """GetObject: "If you include a versionId ... you must have the s3:GetObjectVersion
    permission ... The s3:GetObject permission is not required in this scenario"."""
    params = {"Bucket": "reports", "Key": "r.csv", "VersionId": "v1"}
    get = _policy({"Effect": "Allow", "Action": "s3:GetObject", "Resource": BUCKET_OBJECTS})
    versioned = _policy(
        {"Effect": "Allow", "Action": "s3:GetObjectVersion", "Resource": BUCKET_OBJECTS}
    )
    assert get.authorize("s3", "GetObject", params) is not None
    assert versioned.authorize("s3", "GetObject", params) is None
    assert get.authorize("s3", "GetObject", {"Bucket": "reports", "Key": "r.csv"}) is None


@pytest.mark.parametrize(
    ("extra", "action"),
    [
        ({"ACL": "bucket-owner-full-control"}, "PutObjectAcl"),
        ({"Tagging": "a=b"}, "PutObjectTagging"),
    ],
)
def test_a_put_with_an_acl_or_tags_needs_their_action_too(
    extra: dict[str, str], action: str
) -> None:
    """PutObject's permissions: an ACL needs s3:PutObjectAcl, tags s3:PutObjectTagging."""
    params = {"Bucket": "reports", "Key": "r.csv", **extra}
    put = {"Effect": "Allow", "Action": "s3:PutObject", "Resource": BUCKET_OBJECTS}
    also = {"Effect": "Allow", "Action": f"s3:{action}", "Resource": BUCKET_OBJECTS}
    assert _policy(put).authorize("s3", "PutObject", params) is not None
    assert _policy(put, also).authorize("s3", "PutObject", params) is None


@pytest.mark.parametrize(
    ("effects", "reason"),
    [
        # The claim, denied: the error as described everywhere.
        ("any", "ClientError (AccessDeniedException, HTTP 400)"),
        # The one commit, denied: certainly landed nothing, with AWS's code.
        ("staged", "COMMIT_FAILED: commit canceled: AccessDeniedException"),
    ],
)
def test_once_s_own_write_that_the_role_denies_says_aws_s_code(template, effects, reason):
    """once's own write to its table, denied by the function's role (the table's grant names
    another table), is reported as every error is (docs/handler.md): its class, AWS's code
    and the HTTP status, never a bare class."""
    from once import make_handler
    from once.models import Outcome
    from once.testing import OnceEnv

    with OnceEnv() as env:
        env.role = role_of(
            template,
            names={
                _logical(template, "AWS::DynamoDB::Table", "OrdersTable"): "another-table",
                _logical(template, "AWS::SQS::Queue", "OrdersDlq"): env.dlq_url,
            },
        )
        handler = make_handler(lambda body, attempt: "done", key="orderId", effects=effects)
        delivered = env.deliver(handler, [{"orderId": "o-1"}])

        assert delivered.outcomes == [Outcome.FAILED]
        (result,) = delivered.results
        assert result is not None and result.reason == reason
