"""Each function runs with its own role: every AWS call a worker makes is judged first.

Why: on AWS a function can do what its role grants and nothing more, and a grant that is
missing (a ``ConditionCheck`` staged on a table granted only ``grant_write_data``, a DLQ the
role cannot send to) fails only once deployed. The local cloud holds the function to the
same rule, for once's calls and the business code's alike: the worker process reads its
function's role from the deployed stack (``for_worker``) and ``enforce`` judges each call
its clients make, boto3's or botocore's, before it is sent.

What is judged, and how:

- **The role's identity policies, as the template grants them**: the role's own
  ``Policies``, every ``AWS::IAM::Policy`` and ``AWS::IAM::ManagedPolicy`` that names it,
  and its ``ManagedPolicyArns`` (AWS's managed policies, such as
  ``service-role/AWSLambdaBasicExecutionRole``, from the documents moto ships). ``Ref`` and
  ``Fn::GetAtt`` of the stack's tables, queues, topics... are resolved to the physical
  names the local deploy gave them (``list_stack_resources``); ``Fn::ImportValue`` to the
  exports of the other stacks. What was put on or attached to the role through IAM since
  the deploy counts too, for a worker started after it (``with_policies_since_deploy``).
- **By moto's IAM policy engine** (``moto.iam.access_control.IAMPolicy``): an explicit
  Deny wins, an Allow is needed, nothing else allows (AWS's evaluation for one account
  without resource policies, boundaries or SCPs).
- **Per action, as IAM authorizes each API** (``checks``): a ``TransactWriteItems``
  element by its own action on its own table; ``SendMessageBatch`` as ``sqs:SendMessage``,
  ``DeleteMessageBatch`` as ``sqs:DeleteMessage``, ``ChangeMessageVisibilityBatch`` as
  ``sqs:ChangeMessageVisibility``; ``PublishBatch`` as ``sns:Publish``; CloudWatch's
  ``PutMetricData`` on ``*``. A call this module has no rule for is judged as
  ``<service>:<Operation>`` on ``*``: nothing passes unjudged.
- **Refused as AWS refuses**: a ``ClientError`` raised by the client itself, with the
  service's code and status (``AccessDeniedException`` for DynamoDB, ``AccessDenied`` for
  SQS and CloudWatch, ``AuthorizationError`` for SNS) and AWS's message, "User:
  arn:aws:sts::<account>:assumed-role/<role>/<function> is not authorized to perform:
  <action> on resource: <arn> because no identity-based policy allows the <action> action".

Not judged (``docs/localcloud.md``): resource policies (queue and topic policies are
stripped from the local deploy), KMS key grants of an encrypted queue or topic, a
statement's ``Condition`` (an Allow with one is taken as unconditional, a Deny with one is
left out), ``NotResource``, permission boundaries and SCPs.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import re
import sys
import threading
import uuid
from collections.abc import Callable, Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import unquote, urlparse

from oncecli.aws import LOCAL_ACCOUNT, LOCAL_REGION

# --- which action on which resource ----------------------------------------------------------


@dataclass(frozen=True)
class Check:
    """One thing IAM authorizes for a call: an action (``dynamodb:PutItem``) on a resource
    (an ARN, or ``*`` for an action without resource-level permissions)."""

    action: str
    resource: str


#: The IAM prefix of a botocore service whose signing name is not it.
_PREFIXES = {"cloudwatch": "cloudwatch", "dynamodbstreams": "dynamodb"}

#: Operations AWS never asks IAM about.
_UNJUDGED = frozenset({("sts", "GetCallerIdentity"), ("dynamodb", "DescribeEndpoints")})

#: DynamoDB's transaction elements, by the action IAM checks on their table
#: (https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/transaction-apis-iam.html).
TRANSACTION_ACTIONS = {
    "Put": "dynamodb:PutItem",
    "Update": "dynamodb:UpdateItem",
    "Delete": "dynamodb:DeleteItem",
    "ConditionCheck": "dynamodb:ConditionCheckItem",
    "Get": "dynamodb:GetItem",
}

#: Operations IAM authorizes under another action (SQS API permissions reference; SNS's
#: PublishBatch is authorized as sns:Publish).
_ACTION_OF = {
    ("sqs", "SendMessageBatch"): "SendMessage",
    ("sqs", "DeleteMessageBatch"): "DeleteMessage",
    ("sqs", "ChangeMessageVisibilityBatch"): "ChangeMessageVisibility",
    ("sns", "PublishBatch"): "Publish",
    ("s3", "HeadObject"): "GetObject",
    ("s3", "HeadBucket"): "ListBucket",
    ("s3", "ListObjects"): "ListBucket",
    ("s3", "ListObjectsV2"): "ListBucket",
    ("s3", "ListObjectVersions"): "ListBucketVersions",
    ("s3", "DeleteObjects"): "DeleteObject",
    ("s3", "CopyObject"): "PutObject",
    # A multipart upload is authorized as s3:PutObject at every step; its listings under
    # their own actions (https://docs.aws.amazon.com/AmazonS3/latest/userguide/mpuoverview.html,
    # "Multipart upload API and permissions").
    ("s3", "CreateMultipartUpload"): "PutObject",
    ("s3", "UploadPart"): "PutObject",
    ("s3", "UploadPartCopy"): "PutObject",
    ("s3", "CompleteMultipartUpload"): "PutObject",
    ("s3", "ListParts"): "ListMultipartUploadParts",
    ("s3", "ListMultipartUploads"): "ListBucketMultipartUploads",
    ("s3", "SelectObjectContent"): "GetObject",
    ("s3", "ListBuckets"): "ListAllMyBuckets",
    # A bucket's configurations: S3's operation names are not its actions' (the Service
    # Authorization Reference links each action to the API it authorizes:
    # https://docs.aws.amazon.com/service-authorization/latest/reference/list_amazons3.html;
    # tests/unit/test_iam_reference.py holds this table to it), and deleting one is
    # authorized as putting it ("To use this operation, you must have permission to perform
    # the s3:PutLifecycleConfiguration action", DeleteBucketLifecycle, and so on).
    ("s3", "GetBucketAccelerateConfiguration"): "GetAccelerateConfiguration",
    ("s3", "PutBucketAccelerateConfiguration"): "PutAccelerateConfiguration",
    ("s3", "GetBucketAnalyticsConfiguration"): "GetAnalyticsConfiguration",
    ("s3", "PutBucketAnalyticsConfiguration"): "PutAnalyticsConfiguration",
    ("s3", "DeleteBucketAnalyticsConfiguration"): "PutAnalyticsConfiguration",
    ("s3", "ListBucketAnalyticsConfigurations"): "GetAnalyticsConfiguration",
    ("s3", "DeleteBucketCors"): "PutBucketCORS",
    ("s3", "GetBucketEncryption"): "GetEncryptionConfiguration",
    ("s3", "PutBucketEncryption"): "PutEncryptionConfiguration",
    ("s3", "DeleteBucketEncryption"): "PutEncryptionConfiguration",
    ("s3", "GetBucketIntelligentTieringConfiguration"): "GetIntelligentTieringConfiguration",
    ("s3", "PutBucketIntelligentTieringConfiguration"): "PutIntelligentTieringConfiguration",
    ("s3", "DeleteBucketIntelligentTieringConfiguration"): "PutIntelligentTieringConfiguration",
    ("s3", "ListBucketIntelligentTieringConfigurations"): "GetIntelligentTieringConfiguration",
    ("s3", "GetBucketInventoryConfiguration"): "GetInventoryConfiguration",
    ("s3", "PutBucketInventoryConfiguration"): "PutInventoryConfiguration",
    ("s3", "DeleteBucketInventoryConfiguration"): "PutInventoryConfiguration",
    ("s3", "ListBucketInventoryConfigurations"): "GetInventoryConfiguration",
    ("s3", "GetBucketLifecycle"): "GetLifecycleConfiguration",
    ("s3", "GetBucketLifecycleConfiguration"): "GetLifecycleConfiguration",
    ("s3", "PutBucketLifecycle"): "PutLifecycleConfiguration",
    ("s3", "PutBucketLifecycleConfiguration"): "PutLifecycleConfiguration",
    ("s3", "DeleteBucketLifecycle"): "PutLifecycleConfiguration",
    ("s3", "GetBucketMetricsConfiguration"): "GetMetricsConfiguration",
    ("s3", "PutBucketMetricsConfiguration"): "PutMetricsConfiguration",
    ("s3", "DeleteBucketMetricsConfiguration"): "PutMetricsConfiguration",
    ("s3", "ListBucketMetricsConfigurations"): "GetMetricsConfiguration",
    ("s3", "GetBucketNotificationConfiguration"): "GetBucketNotification",
    ("s3", "PutBucketNotificationConfiguration"): "PutBucketNotification",
    ("s3", "DeleteBucketOwnershipControls"): "PutBucketOwnershipControls",
    ("s3", "GetBucketReplication"): "GetReplicationConfiguration",
    ("s3", "PutBucketReplication"): "PutReplicationConfiguration",
    ("s3", "DeleteBucketReplication"): "PutReplicationConfiguration",
    ("s3", "DeleteBucketTagging"): "PutBucketTagging",
    ("s3", "GetObjectLockConfiguration"): "GetBucketObjectLockConfiguration",
    ("s3", "PutObjectLockConfiguration"): "PutBucketObjectLockConfiguration",
    ("s3", "GetPublicAccessBlock"): "GetBucketPublicAccessBlock",
    ("s3", "PutPublicAccessBlock"): "PutBucketPublicAccessBlock",
    ("s3", "DeletePublicAccessBlock"): "PutBucketPublicAccessBlock",
    ("s3", "CreateBucketMetadataConfiguration"): "CreateBucketMetadataTableConfiguration",
    ("s3", "GetBucketMetadataConfiguration"): "GetBucketMetadataTableConfiguration",
    ("s3", "DeleteBucketMetadataConfiguration"): "DeleteBucketMetadataTableConfiguration",
}
#: An S3 object operation that names a version (``VersionId``) is authorized as its version
#: action, not the plain one: "If you include a versionId in your request header, you must have
#: the s3:GetObjectVersion permission ... The s3:GetObject permission is not required"
#: (https://docs.aws.amazon.com/AmazonS3/latest/API/API_GetObject.html; DeleteObject,
#: GetObjectAcl, GetObjectTagging alike).
_S3_VERSION_ACTION = {
    "GetObject": "GetObjectVersion",
    "GetObjectAcl": "GetObjectVersionAcl",
    "PutObjectAcl": "PutObjectVersionAcl",
    "GetObjectTagging": "GetObjectVersionTagging",
    "PutObjectTagging": "PutObjectVersionTagging",
    "DeleteObjectTagging": "DeleteObjectVersionTagging",
}
#: Object operations IAM authorizes under more than one action, by whether a version is
#: named: GetObjectAttributes needs s3:GetObject and s3:GetObjectAttributes, or with a
#: VersionId s3:GetObjectVersion and s3:GetObjectVersionAttributes
#: (https://docs.aws.amazon.com/AmazonS3/latest/API/API_GetObjectAttributes.html); deleting
#: "you must always have the s3:DeleteObject permission", and for a version
#: s3:DeleteObjectVersion too (https://docs.aws.amazon.com/AmazonS3/latest/API/API_DeleteObject.html,
#: .../API_DeleteObjects.html).
_S3_ACTIONS = {
    ("GetObjectAttributes", False): ("GetObject", "GetObjectAttributes"),
    ("GetObjectAttributes", True): ("GetObjectVersion", "GetObjectVersionAttributes"),
    ("DeleteObject", True): ("DeleteObject", "DeleteObjectVersion"),
    ("DeleteObjects", True): ("DeleteObject", "DeleteObjectVersion"),
}
#: Parameters of an object write that IAM authorizes under one more action: an ACL
#: ("To ... set the ACL ... you must have s3:PutObjectAcl") and tags (s3:PutObjectTagging)
#: (https://docs.aws.amazon.com/AmazonS3/latest/API/API_PutObject.html, "Permissions").
_S3_EXTRA_ACTIONS = (
    (("ACL", "GrantFullControl", "GrantRead", "GrantReadACP", "GrantWriteACP"), "PutObjectAcl"),
    (("Tagging",), "PutObjectTagging"),
)
_S3_OBJECT_WRITES = frozenset({"PutObject", "CopyObject", "CreateMultipartUpload"})
#: S3 operations IAM authorizes under another service's prefix (S3 Express One Zone, S3
#: Object Lambda), judged on ``*`` (https://docs.aws.amazon.com/AmazonS3/latest/API/API_CreateSession.html,
#: .../API_ListDirectoryBuckets.html, .../API_WriteGetObjectResponse.html).
_S3_ELSEWHERE = {
    "CreateSession": "s3express:CreateSession",
    "ListDirectoryBuckets": "s3express:ListAllMyDirectoryBuckets",
    "WriteGetObjectResponse": "s3-object-lambda:WriteGetObjectResponse",
}

#: What this module maps exactly (the rest: ``<prefix>:<Operation>`` on ``*``).
EXACT_SERVICES = ("dynamodb", "sqs", "sns", "cloudwatch", "s3", "logs", "sts")


def iam_prefix(service_name: str, signing_name: str | None = None) -> str:
    """The IAM service prefix of a botocore service (``cloudwatch`` signs as ``monitoring``)."""
    return _PREFIXES.get(service_name) or signing_name or service_name


def table_arn(name: str, account: str, region: str) -> str:
    """A DynamoDB table's ARN (a TableName may be one already)."""
    return name if name.startswith("arn:") else f"arn:aws:dynamodb:{region}:{account}:table/{name}"


def queue_arn(url: str, account: str, region: str) -> str:
    """A queue's ARN from its URL (``.../<account>/<name>``; the account is the URL's)."""
    if url.startswith("arn:"):
        return url
    parts = [p for p in urlparse(url).path.split("/") if p]
    owner, name = (parts[-2], parts[-1]) if len(parts) >= 2 else (account, parts[-1])
    host = urlparse(url).hostname or ""
    found = re.match(r"(?:sqs\.)?([a-z]{2}(?:-[a-z]+)+-\d)\.", host)
    return f"arn:aws:sqs:{found.group(1) if found else region}:{owner}:{name}"


def event_bus_arn(name: str | None, account: str, region: str) -> str:
    """An event bus's ARN from PutEvents' ``EventBusName``: a name or an ARN ("The name or
    ARN of the event bus to receive the event"), the default bus when it is left out
    (botocore events/2015-10-07 PutEventsRequestEntry.EventBusName)."""
    if name and name.startswith("arn:"):
        return name
    return f"arn:aws:events:{region}:{account}:event-bus/{name or 'default'}"


#: DynamoDB's PartiQL operations: where each request names its statements.
_PARTIQL = {
    "ExecuteStatement": lambda p: [p.get("Statement")],
    "BatchExecuteStatement": lambda p: [s.get("Statement") for s in p.get("Statements") or []],
    "ExecuteTransaction": lambda p: [s.get("Statement") for s in p.get("TransactStatements") or []],
}
#: PartiQL's tokens: a quoted name (``""`` inside is one quote), a string literal, a word, any
#: other character.
_PARTIQL_TOKEN = re.compile(r'"(?:[^"]|"")*"|\'(?:[^\']|\'\')*\'|[A-Za-z_][A-Za-z0-9_-]*|\S')
#: After its verb, the keyword that comes before the table a statement names.
_BEFORE_TABLE = {"SELECT": "FROM", "DELETE": "FROM", "INSERT": "INTO", "UPDATE": None}


def partiql_target(statement: str) -> tuple[str, str, str | None] | None:
    """A PartiQL statement's verb (``SELECT``, ``INSERT``, ``UPDATE``, ``DELETE``), the table
    it names and the index, if any: ``SELECT ... FROM "T"."I"``, ``INSERT INTO "T"``,
    ``UPDATE "T"``, ``DELETE FROM "T"``; an ``EXISTS(SELECT ...)`` condition (a transaction's
    condition check) reads, as a SELECT. Keywords inside quoted names and strings are names
    and strings. None when the statement says none of these."""
    tokens = _PARTIQL_TOKEN.findall(statement)
    words = [t.upper() if t[:1] not in "\"'" else t for t in tokens]
    if words[:2] == ["EXISTS", "("]:
        words, tokens = words[2:], tokens[2:]
    if not words or words[0] not in _BEFORE_TABLE:
        return None
    verb, keyword = words[0], _BEFORE_TABLE[words[0]]
    at = 1 if keyword is None else (words.index(keyword, 1) + 1 if keyword in words[1:] else 0)
    if not at or at >= len(tokens):
        return None
    table, index = _partiql_name(tokens[at]), None
    if at + 2 < len(tokens) and tokens[at + 1] == ".":
        index = _partiql_name(tokens[at + 2])
    return (verb, table, index) if table else None


def _partiql_name(token: str) -> str:
    """A table or index name as a token spells it: quoted (``""`` is one quote) or bare."""
    if token.startswith('"') and token.endswith('"') and len(token) >= 2:
        return token[1:-1].replace('""', '"')
    return token if re.fullmatch(r"[A-Za-z0-9_-]+", token) else ""


def _partiql(operation: str, params: Mapping[str, Any], account: str, region: str) -> list[Check]:
    """PartiQL is authorized by each statement's verb on the table (or index) it names:
    ``dynamodb:PartiQLSelect``, ``PartiQLInsert``, ``PartiQLUpdate``, ``PartiQLDelete``
    (https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/ql-iam.html); an
    ``EXISTS`` condition reads its table (``PartiQLSelect``). A statement whose verb or
    table this cannot read is judged on ``*`` under ``dynamodb:PartiQLSelect`` and the
    verbs that change: all four must be granted on every table."""
    checks = []
    for statement in _PARTIQL[operation](params):
        found = partiql_target(statement) if isinstance(statement, str) else None
        if found is None:
            checks += [Check(f"dynamodb:PartiQL{verb.capitalize()}", "*") for verb in _BEFORE_TABLE]
            continue
        verb, table, index = found
        resource = table_arn(table, account, region) + (f"/index/{index}" if index else "")
        checks.append(Check(f"dynamodb:PartiQL{verb.capitalize()}", resource))
    return checks


def _dynamodb(operation: str, params: Mapping[str, Any], account: str, region: str) -> list[Check]:
    if operation in _PARTIQL:
        return _partiql(operation, params, account, region)
    if operation == "TransactWriteItems":
        checks = []
        for element in params.get("TransactItems") or []:
            for kind, body in element.items():
                action = TRANSACTION_ACTIONS.get(kind, f"dynamodb:{kind}")
                checks.append(Check(action, table_arn(body["TableName"], account, region)))
        return checks
    if operation == "TransactGetItems":
        return [
            Check("dynamodb:GetItem", table_arn(body["TableName"], account, region))
            for element in params.get("TransactItems") or []
            for body in element.values()
        ]
    if operation in ("BatchWriteItem", "BatchGetItem"):
        return [
            Check(f"dynamodb:{operation}", table_arn(name, account, region))
            for name in (params.get("RequestItems") or {})
        ]
    if params.get("StreamArn"):  # DynamoDB Streams: DescribeStream, GetShardIterator
        return [Check(f"dynamodb:{operation}", params["StreamArn"])]
    name = params.get("TableName") or params.get("ResourceArn")
    if not name:
        return [Check(f"dynamodb:{operation}", "*")]
    resource = table_arn(name, account, region)
    if operation in ("Query", "Scan") and params.get("IndexName"):
        resource += f"/index/{params['IndexName']}"
    return [Check(f"dynamodb:{operation}", resource)]


def _sqs(operation: str, params: Mapping[str, Any], account: str, region: str) -> list[Check]:
    action = "sqs:" + _ACTION_OF.get(("sqs", operation), operation)
    if params.get("QueueUrl"):
        return [Check(action, queue_arn(params["QueueUrl"], account, region))]
    if params.get("QueueName"):  # CreateQueue, GetQueueUrl
        owner = params.get("QueueOwnerAWSAccountId") or account
        return [Check(action, f"arn:aws:sqs:{region}:{owner}:{params['QueueName']}")]
    if params.get("SourceArn"):  # the message move tasks
        return [Check(action, params["SourceArn"])]
    return [Check(action, "*")]


def _sns(operation: str, params: Mapping[str, Any], account: str, region: str) -> list[Check]:
    action = "sns:" + _ACTION_OF.get(("sns", operation), operation)
    if params.get("TopicArn") or params.get("TargetArn"):
        return [Check(action, params.get("TopicArn") or params["TargetArn"])]
    if params.get("SubscriptionArn"):  # arn:...:<topic>:<subscription id>
        return [Check(action, params["SubscriptionArn"].rpartition(":")[0])]
    if operation == "CreateTopic" and params.get("Name"):
        return [Check(action, f"arn:aws:sns:{region}:{account}:{params['Name']}")]
    if params.get("ResourceArn"):
        return [Check(action, params["ResourceArn"])]
    return [Check(action, "*")]


def _s3(operation: str, params: Mapping[str, Any], account: str, region: str) -> list[Check]:
    if operation in _S3_ELSEWHERE:
        return [Check(_S3_ELSEWHERE[operation], "*")]
    named = operation
    if params.get("VersionId") and operation in _S3_VERSION_ACTION:
        named = _S3_VERSION_ACTION[operation]
    elif operation == "HeadObject" and params.get("VersionId"):
        named = "GetObjectVersion"
    action = "s3:" + _ACTION_OF.get(("s3", named), named)
    bucket = params.get("Bucket")
    if not bucket:
        return [Check(action, "*")]
    if "Key" in params or operation == "DeleteObjects":
        objects = (
            [
                (o["Key"], bool(o.get("VersionId")))
                for o in (params.get("Delete") or {}).get("Objects", [])
            ]
            if operation == "DeleteObjects"
            else [(params["Key"], bool(params.get("VersionId")))]
        )
        checks = [
            Check(f"s3:{name}", f"arn:aws:s3:::{bucket}/{key}")
            for key, versioned in objects
            for name in _S3_ACTIONS.get((operation, versioned), (action.partition(":")[2],))
        ]
        if operation in _S3_OBJECT_WRITES:
            checks += [
                Check(f"s3:{extra}", f"arn:aws:s3:::{bucket}/{params['Key']}")
                for names, extra in _S3_EXTRA_ACTIONS
                if any(params.get(name) for name in names)
            ]
        source = _copy_source(params.get("CopySource"))
        if operation in ("CopyObject", "UploadPartCopy") and source is not None:
            checks.append(Check(source[0], source[1]))
        return checks
    return [Check(action, f"arn:aws:s3:::{bucket}")]


def _copy_source(source: Any) -> tuple[str, str] | None:
    """The read a copy makes of its source, as (action, resource): a string
    ``bucket/key[?versionId=...]`` or boto3's dict ``{"Bucket", "Key", "VersionId"}``."""
    if isinstance(source, str):
        # The header is URL-encoded (boto3 encodes a dict's key so): the resource is the key.
        path, _, query = source.lstrip("/").partition("?versionId=")
        action = "s3:GetObjectVersion" if query else "s3:GetObject"
        return (action, f"arn:aws:s3:::{unquote(path)}")
    if isinstance(source, Mapping) and source.get("Bucket") and source.get("Key"):
        action = "s3:GetObjectVersion" if source.get("VersionId") else "s3:GetObject"
        return (action, f"arn:aws:s3:::{source['Bucket']}/{source['Key']}")
    return None


def _logs(operation: str, params: Mapping[str, Any], account: str, region: str) -> list[Check]:
    group = params.get("logGroupName")
    if not group:
        return [Check(f"logs:{operation}", "*")]
    resource = f"arn:aws:logs:{region}:{account}:log-group:{group}"
    stream = params.get("logStreamName")
    resource += f":log-stream:{stream}" if stream else ":*"
    return [Check(f"logs:{operation}", resource)]


def _sts(operation: str, params: Mapping[str, Any], account: str, region: str) -> list[Check]:
    return [Check(f"sts:{operation}", params.get("RoleArn") or "*")]


def _events(operation: str, params: Mapping[str, Any], account: str, region: str) -> list[Check]:
    """EventBridge's PutEvents is authorized as ``events:PutEvents`` on the bus each entry
    names: "the resource ... is the ARN of the event bus" (Service Authorization Reference,
    https://docs.aws.amazon.com/service-authorization/latest/reference/list_amazoneventbridge.html:
    PutEvents, resource type event-bus; https://docs.aws.amazon.com/eventbridge/latest/userguide/eb-use-identity-based.html).
    Its other operations, on ``*`` as the services this module does not map."""
    if operation != "PutEvents":
        return [Check(f"events:{operation}", "*")]
    buses = [entry.get("EventBusName") for entry in params.get("Entries") or []] or [None]
    return [
        Check("events:PutEvents", arn)
        for arn in dict.fromkeys(event_bus_arn(bus, account, region) for bus in buses)
    ]


def _anywhere(prefix: str) -> Callable[[str, Mapping[str, Any], str, str], list[Check]]:
    """CloudWatch's PutMetricData (and any action without resource-level rules) on ``*``."""
    return lambda operation, _params, _account, _region: [Check(f"{prefix}:{operation}", "*")]


_RULES: dict[str, Callable[[str, Mapping[str, Any], str, str], list[Check]]] = {
    "dynamodb": _dynamodb,
    "sqs": _sqs,
    "sns": _sns,
    "s3": _s3,
    "logs": _logs,
    "sts": _sts,
    "cloudwatch": _anywhere("cloudwatch"),
    "events": _events,
}


def checks(
    prefix: str,
    operation: str,
    params: Mapping[str, Any],
    account: str = LOCAL_ACCOUNT,
    region: str = LOCAL_REGION,
) -> list[Check]:
    """What IAM authorizes for one call of ``operation`` on the service of IAM prefix
    ``prefix`` with ``params`` (the call's API parameters): every (action, resource)
    pair, each of which must be allowed. Empty for a call AWS never asks IAM about."""
    if (prefix, operation) in _UNJUDGED:
        return []
    rule = _RULES.get(prefix)
    if rule is None:
        return [Check(f"{prefix}:{operation}", "*")]
    return rule(operation, params, account, region)


# --- the role's verdict ------------------------------------------------------------------------

#: A refusal as each service answers it: (error code, HTTP status, the action as its message
#: spells it). SQS: "AccessDenied ... sqs:sendmessage"; SNS: "AuthorizationError ...
#: SNS:Publish"; a service not listed answers as its protocol does.
_REFUSALS: dict[str, tuple[str, int, Callable[[str], str]]] = {
    "dynamodb": ("AccessDeniedException", 400, str),
    "sqs": ("AccessDenied", 403, str.lower),
    "sns": ("AuthorizationError", 403, lambda a: "SNS:" + a.partition(":")[2]),
    "cloudwatch": ("AccessDenied", 403, str),
    "s3": ("AccessDenied", 403, str),
    "sts": ("AccessDenied", 403, str),
}
_BY_PROTOCOL = {
    "query": ("AccessDenied", 403),
    "rest-xml": ("AccessDenied", 403),
    "ec2": ("UnauthorizedOperation", 403),
    "rest-json": ("AccessDeniedException", 403),
}


@dataclass(frozen=True)
class Denial:
    """A call the role refuses: what AWS answers, as botocore parses it."""

    check: Check
    code: str
    status: int
    message: str
    query_code: str | None = None

    def response(self) -> dict[str, Any]:
        """The parsed error response botocore hands ``ClientError``."""
        error: dict[str, Any] = {"Code": self.code, "Message": self.message, "Type": "Sender"}
        if self.query_code:
            error["QueryErrorCode"] = self.query_code
        return {
            "Error": error,
            "ResponseMetadata": {
                "RequestId": str(uuid.uuid4()),
                "HTTPStatusCode": self.status,
                "HTTPHeaders": {},
                "RetryAttempts": 0,
            },
        }


def _iam_pattern(pattern: str) -> str:
    """An IAM ARN pattern as moto's matcher reads it: moto turns ``*`` into ``.*`` and
    matches the rest as a regular expression, so the rest is escaped and IAM's ``?`` (one
    character) becomes ``.``."""
    return "".join("." if ch == "?" else ch if ch == "*" else re.escape(ch) for ch in pattern)


def _as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def _for_moto(document: Mapping[str, Any]) -> str:
    """A policy document as moto's engine judges it faithfully: actions matched without
    case (IAM's rule: moto's matcher keeps case), resource wildcards as IAM reads them; a
    Deny with a ``Condition`` left out and an Allow's ``Condition`` dropped (moto cannot
    evaluate a condition without the request's context, and answers DENIED for any)."""
    statements = []
    for statement in _as_list(document.get("Statement") or []):
        if not isinstance(statement, dict):
            continue
        if statement.get("Condition") and statement.get("Effect") == "Deny":
            continue
        kept = {k: v for k, v in statement.items() if k != "Condition"}
        for key in ("Action", "NotAction"):
            if key in kept:
                kept[key] = [str(a).lower() for a in _as_list(kept[key])]
        if "Resource" in kept:
            kept["Resource"] = [_iam_pattern(str(r)) for r in _as_list(kept["Resource"])]
        elif "NotResource" not in kept:
            kept["Resource"] = ["$^"]  # no Resource: the statement matches nothing
        statements.append(kept)
    return json.dumps({"Version": "2012-10-17", "Statement": statements})


@dataclass(frozen=True)
class RolePolicy:
    """A function's role: its identity policy documents (JSON, resolved ARNs), its name,
    the function (the session name of its assumed role), account and region."""

    role_name: str
    documents: tuple[str, ...]
    session_name: str = "function"
    account: str = LOCAL_ACCOUNT
    region: str = LOCAL_REGION
    #: What could not be resolved or is not judged (a note per item), for the worker's log.
    notes: tuple[str, ...] = ()
    #: The names of the role's inline policies the template defines.
    inline_names: tuple[str, ...] = ()
    _engines: list[Any] = field(default_factory=list, compare=False, repr=False)

    @property
    def principal(self) -> str:
        return f"arn:aws:sts::{self.account}:assumed-role/{self.role_name}/{self.session_name}"

    def enforced(self) -> AbstractContextManager[RolePolicy]:
        """``enforce(self)``: what ``OnceEnv(role=...)`` enters around each invocation."""
        return enforce(self)

    def prepare(self) -> RolePolicy:
        """Load the policy engine and read the documents now (moto's import takes a third
        of a second), so that no call pays for it."""
        self._policies()
        return self

    def _policies(self) -> list[Any]:
        if not self._engines:
            from moto.iam.access_control import IAMPolicy

            self._engines.extend(IAMPolicy(_for_moto(json.loads(d))) for d in self.documents)
        return self._engines

    def verdict(self, action: str, resource: str) -> str:
        """``allowed``, ``explicit`` (a Deny matches) or ``implicit`` (no Allow matches)."""
        from moto.iam.access_control import PermissionResult

        results = [p.is_action_permitted(action.lower(), resource) for p in self._policies()]
        if PermissionResult.DENIED in results:
            return "explicit"
        return "allowed" if PermissionResult.PERMITTED in results else "implicit"

    def allows(self, action: str, resource: str) -> bool:
        return self.verdict(action, resource) == "allowed"

    def authorize(
        self,
        service: str,
        operation: str,
        params: Mapping[str, Any],
        *,
        signing_name: str | None = None,
        protocol: str = "json",
        region: str | None = None,
    ) -> Denial | None:
        """None if the role allows the call (every action it needs), else the refusal of the
        first action it does not allow. ``service``: botocore's service name."""
        prefix = iam_prefix(service, signing_name)
        for check in checks(prefix, operation, params, self.account, region or self.region):
            verdict = self.verdict(check.action, check.resource)
            if verdict != "allowed":
                return self._denial(prefix, protocol, check, verdict)
        return None

    def _denial(self, prefix: str, protocol: str, check: Check, verdict: str) -> Denial:
        code, status, spell = _REFUSALS.get(prefix) or (
            *_BY_PROTOCOL.get(protocol, ("AccessDeniedException", 400)),
            str,
        )
        action = spell(check.action)
        on = "" if check.resource == "*" else f" on resource: {check.resource}"
        why = (
            "with an explicit deny in an identity-based policy"
            if verdict == "explicit"
            else f"because no identity-based policy allows the {action} action"
        )
        message = f"User: {self.principal} is not authorized to perform: {action}{on} {why}"
        query_code = "AccessDeniedException" if prefix == "sqs" else None
        return Denial(check, code, status, message, query_code)


# --- enforcing it on every client of this process ------------------------------------------

_lock = threading.Lock()
_active: list[RolePolicy] = []


def _judged(original: Callable[..., Any]) -> Callable[..., Any]:
    """botocore's ``BaseClient._convert_to_request_dict``, the step of every operation call
    that validates its parameters (after the events that build them) and serializes them:
    the call is judged once botocore accepted it, as AWS judges a request it received, and
    a refused one is raised as botocore raises a refusal, never sent. A presigned URL is
    not judged here: AWS judges it when it is used."""

    @functools.wraps(original)
    def _convert_to_request_dict(
        client: Any, api_params: Mapping[str, Any], operation_model: Any, *args: Any, **kwargs: Any
    ) -> Any:
        request_dict = original(client, api_params, operation_model, *args, **kwargs)
        context = kwargs.get("context") or {}
        if _active and not context.get("is_presign_request"):
            model = client.meta.service_model
            denial = _active[-1].authorize(
                model.service_name,
                operation_model.name,
                api_params,
                signing_name=model.signing_name,
                protocol=model.protocol,
                region=client.meta.region_name,
            )
            if denial is not None:
                # The modeled class of the code, if the service has one (SNS's
                # AuthorizationErrorException), as botocore's _make_api_call picks it.
                error_class = client.exceptions.from_code(denial.code)
                raise error_class(denial.response(), operation_model.name)
        return request_dict

    _convert_to_request_dict.__once_role__ = True  # type: ignore[attr-defined]
    return _convert_to_request_dict


@contextmanager
def enforce(policy: RolePolicy) -> Iterator[RolePolicy]:
    """Judge every AWS call of this process by ``policy`` until the block ends: every
    client's, boto3's or botocore's, made before or after (botocore's
    ``BaseClient._convert_to_request_dict``, a step of every operation call, is wrapped).
    A call that botocore itself refuses (a missing parameter) is refused as before."""
    import botocore.client

    base: Any = botocore.client.BaseClient  # its stubs leave the private step out
    with _lock:
        if not getattr(base._convert_to_request_dict, "__once_role__", False):
            base._convert_to_request_dict = _judged(base._convert_to_request_dict)
        _active.append(policy)
    try:
        yield policy
    finally:
        with _lock:
            _active.remove(policy)
            wrapped = base._convert_to_request_dict
            if not _active and getattr(wrapped, "__once_role__", False):
                base._convert_to_request_dict = wrapped.__wrapped__


# --- the role as the template grants it --------------------------------------------------------


class RoleNotFound(LookupError):
    """The function's role is not one the stack's template defines."""


_UNRESOLVED = "arn:unresolved"


@dataclass
class _Resolver:
    """Resolves CloudFormation's intrinsic functions in a policy document, to the physical
    ids the deploy gave the stack's resources (``physical``)."""

    resources: Mapping[str, Any]
    physical: Mapping[str, str]
    account: str
    region: str
    exports: Mapping[str, str] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    def ref(self, name: str) -> str:
        pseudo = {
            "AWS::AccountId": self.account,
            "AWS::Region": self.region,
            "AWS::Partition": "aws",
            "AWS::URLSuffix": "amazonaws.com",
            "AWS::NoValue": "",
        }
        if name in pseudo:
            return pseudo[name]
        if name in self.physical:
            return self.physical[name]
        self.notes.append(f"Ref {name} not resolved: its grants match nothing")
        return f"{_UNRESOLVED}:{name}"

    def get_att(self, name: str, attribute: str) -> str:
        kind = (self.resources.get(name) or {}).get("Type", "")
        phys = self.physical.get(name)
        if not phys:  # not deployed, or deployed without a physical id
            self.notes.append(f"Fn::GetAtt {name}.{attribute} not resolved: matches nothing")
            return f"{_UNRESOLVED}:{name}.{attribute}"
        a, r = self.account, self.region
        # Each attribute computed only when asked: one type's reading of a physical id must
        # not fail another's (a queue's URL parsed out of a bus's name).
        arns: dict[str, Callable[[], str]] = {
            "AWS::DynamoDB::Table": {
                "Arn": lambda: table_arn(phys, a, r),
                "StreamArn": lambda: f"{table_arn(phys, a, r)}/stream/*",
            },
            "AWS::SQS::Queue": {
                "Arn": lambda: queue_arn(phys, a, r),
                "QueueName": lambda: phys.rstrip("/").rsplit("/", 1)[-1],
                "QueueUrl": lambda: phys,
            },
            "AWS::SNS::Topic": {"TopicArn": lambda: phys,
                                "TopicName": lambda: phys.rsplit(":", 1)[-1]},
            "AWS::Logs::LogGroup": {"Arn": lambda: f"arn:aws:logs:{r}:{a}:log-group:{phys}:*"},
            "AWS::KMS::Key": {"Arn": lambda: phys if phys.startswith("arn:") else
                              f"arn:aws:kms:{r}:{a}:key/{phys}", "KeyId": lambda: phys},
            "AWS::IAM::Role": {"Arn": lambda: f"arn:aws:iam::{a}:role/{phys}"},
            "AWS::Lambda::Function": {"Arn": lambda: f"arn:aws:lambda:{r}:{a}:function:{phys}"},
            "AWS::S3::Bucket": {"Arn": lambda: f"arn:aws:s3:::{phys}"},
            "AWS::Kinesis::Stream": {"Arn": lambda: f"arn:aws:kinesis:{r}:{a}:stream/{phys}"},
            "AWS::Events::EventBus": {"Arn": lambda: event_bus_arn(phys, a, r),
                                      "Name": lambda: phys},
            "AWS::SSM::Parameter": {
                "Arn": lambda: f"arn:aws:ssm:{r}:{a}:parameter/{phys.lstrip('/')}"
            },
        }.get(kind, {})  # fmt: skip
        if attribute in arns:
            try:
                return arns[attribute]()
            except (IndexError, ValueError) as error:
                self.notes.append(
                    f"Fn::GetAtt {name}.{attribute} ({kind}) not resolved from {phys!r} "
                    f"({error}): matches nothing"
                )
                return f"{_UNRESOLVED}:{name}.{attribute}"
        if attribute in ("Arn", "Id") and phys.startswith("arn:"):
            return phys
        self.notes.append(f"Fn::GetAtt {name}.{attribute} ({kind}) not resolved: matches nothing")
        return f"{_UNRESOLVED}:{name}.{attribute}"

    def __call__(self, value: Any) -> Any:
        if isinstance(value, list):
            return [self(v) for v in value]
        if not isinstance(value, dict):
            return value
        if len(value) != 1:
            return {k: self(v) for k, v in value.items()}
        ((key, arg),) = value.items()
        if key == "Ref":
            return self.ref(arg)
        if key == "Fn::GetAtt":
            name, attribute = arg.split(".", 1) if isinstance(arg, str) else arg
            return self.get_att(name, self(attribute))
        if key == "Fn::Join":
            separator, parts = arg
            return separator.join(str(self(p)) for p in self(parts))
        if key == "Fn::Sub":
            text, variables = (arg, {}) if isinstance(arg, str) else arg
            bound = {k: str(self(v)) for k, v in variables.items()}

            def sub(found: re.Match[str]) -> str:
                name = found.group(1)
                if name in bound:
                    return bound[name]
                if "." in name:
                    return self.get_att(*name.split(".", 1))
                return self.ref(name)

            return re.sub(r"\$\{([^}!][^}]*)\}", sub, text)
        if key == "Fn::Select":
            index, items = arg
            return self(items)[int(self(index))]
        if key == "Fn::Split":
            separator, text = arg
            return str(self(text)).split(separator)
        if key == "Fn::ImportValue":
            name = self(arg)
            if name in self.exports:
                return self.exports[name]
            self.notes.append(f"Fn::ImportValue {name} not resolved: matches nothing")
            return f"{_UNRESOLVED}:{name}"
        if key.startswith("Fn::"):
            self.notes.append(f"{key} not resolved: matches nothing")
            return f"{_UNRESOLVED}:{key}"
        return {key: self(arg)}


def _names_role(roles: Any, role_id: str) -> bool:
    return any(r == {"Ref": role_id} or r == role_id for r in _as_list(roles or []))


def aws_managed_policy(arn: str) -> dict[str, Any] | None:
    """An AWS managed policy's document (``arn:aws:iam::aws:policy/...``), as moto ships it."""
    from moto.iam.aws_managed_policies import aws_managed_policies_data

    name = arn.rsplit("/", 1)[-1]
    entry = _managed_policies(aws_managed_policies_data).get(name)
    if entry is None or not arn.startswith("arn:aws:iam::aws:policy/"):
        return None
    document: dict[str, Any] = entry["Document"]
    return document


@functools.cache
def _managed_policies(data: str) -> dict[str, Any]:
    parsed: dict[str, Any] = json.loads(data)
    return parsed


def role_from_template(
    template: Mapping[str, Any],
    function: str,
    physical: Mapping[str, str],
    *,
    account: str = LOCAL_ACCOUNT,
    region: str = LOCAL_REGION,
    exports: Mapping[str, str] | None = None,
    session_name: str | None = None,
) -> RolePolicy:
    """The role of the template's function ``function`` (its logical id), as the template
    grants it, with each resource named by ``physical`` (logical id to physical id: a
    table's name, a queue's URL, a topic's ARN...)."""
    resources: Mapping[str, Any] = template.get("Resources") or {}
    role = (resources.get(function) or {}).get("Properties", {}).get("Role")
    role_id = None
    if isinstance(role, dict) and "Fn::GetAtt" in role:
        target = role["Fn::GetAtt"]
        role_id = target.split(".")[0] if isinstance(target, str) else target[0]
    if role_id is None or (resources.get(role_id) or {}).get("Type") != "AWS::IAM::Role":
        raise RoleNotFound(
            f"the role of {function} is not a role of its template ({json.dumps(role)}): "
            "its permissions cannot be read"
        )
    resolve = _Resolver(resources, physical, account, region, exports or {})
    properties = resources[role_id].get("Properties", {})
    inline = list(properties.get("Policies") or [])
    documents: list[Any] = [p.get("PolicyDocument") for p in inline]
    managed: list[str] = []
    for resource in resources.values():
        kind, props = resource.get("Type"), resource.get("Properties", {})
        if kind in ("AWS::IAM::Policy", "AWS::IAM::ManagedPolicy") and _names_role(
            props.get("Roles"), role_id
        ):
            documents.append(props.get("PolicyDocument"))
            if kind == "AWS::IAM::Policy":
                inline.append(props)
    for entry in properties.get("ManagedPolicyArns") or []:
        if isinstance(entry, dict) and set(entry) == {"Ref"} and entry["Ref"] in resources:
            target = resources[entry["Ref"]]
            if target.get("Type") == "AWS::IAM::ManagedPolicy":
                if not _names_role(target.get("Properties", {}).get("Roles"), role_id):
                    documents.append(target.get("Properties", {}).get("PolicyDocument"))
                continue
        managed.append(str(resolve(entry)))
    for arn in managed:
        document = aws_managed_policy(arn)
        if document is None:
            resolve.notes.append(f"managed policy {arn} unknown: it grants nothing here")
        else:
            documents.append(document)
    resolved = tuple(json.dumps(resolve(d)) for d in documents if d)
    return RolePolicy(
        role_name=physical.get(role_id, role_id),
        documents=resolved,
        session_name=session_name or physical.get(function, function),
        account=account,
        region=region,
        notes=tuple(dict.fromkeys(resolve.notes)),
        inline_names=tuple(str(resolve(p.get("PolicyName"))) for p in inline),
    )


# --- the role of a function deployed on the local cloud ------------------------------------


def _document(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value)


def with_policies_since_deploy(policy: RolePolicy, iam: Any) -> RolePolicy:
    """``policy`` and what was put on or attached to its role through IAM after the deploy
    (``iam``: a client of the local cloud's IAM), as on AWS, where a role's policies can
    change under a running function: an inline policy the template does not define, and
    an attached managed policy (moto's CloudFormation attaches none of the template's)."""
    extra: list[str] = []
    role = policy.role_name
    for name in iam.list_role_policies(RoleName=role)["PolicyNames"]:
        if name not in policy.inline_names:
            got = iam.get_role_policy(RoleName=role, PolicyName=name)
            extra.append(_document(got["PolicyDocument"]))
    for attached in iam.list_attached_role_policies(RoleName=role)["AttachedPolicies"]:
        arn = attached["PolicyArn"]
        managed = aws_managed_policy(arn)
        if managed is not None:
            extra.append(json.dumps(managed))
            continue
        version = iam.get_policy(PolicyArn=arn)["Policy"]["DefaultVersionId"]
        got = iam.get_policy_version(PolicyArn=arn, VersionId=version)
        extra.append(_document(got["PolicyVersion"]["Document"]))
    if not extra:
        return policy
    return dataclasses.replace(policy, documents=policy.documents + tuple(extra), _engines=[])


def deployed_role(cfn: Any, function_name: str, iam: Any = None) -> RolePolicy:
    """The role of the function ``function_name`` as its stack, deployed on the local cloud
    that ``cfn`` (a CloudFormation client) reaches, grants it: the deployed template's
    policies, with the physical ids of the stack's resources and the exports of every
    stack; with ``iam`` (the local cloud's IAM), also what was put on the role since
    (``with_policies_since_deploy``)."""
    stacks = cfn.list_stacks(StackStatusFilter=["CREATE_COMPLETE", "UPDATE_COMPLETE"])
    names = [s["StackName"] for s in stacks.get("StackSummaries", [])]
    exports = {e["Name"]: e["Value"] for e in cfn.list_exports().get("Exports", [])}
    for stack in names:
        listed = cfn.list_stack_resources(StackName=stack)["StackResourceSummaries"]
        # A resource deployed without a physical id resolves to nothing (its grants match
        # nothing, noted), never fails the rest of the role.
        physical = {
            r["LogicalResourceId"]: r["PhysicalResourceId"]
            for r in listed
            if r.get("PhysicalResourceId")
        }
        function = next(
            (
                r["LogicalResourceId"]
                for r in listed
                if r["ResourceType"] == "AWS::Lambda::Function"
                and r.get("PhysicalResourceId") == function_name
            ),
            None,
        )
        if function is None:
            continue
        body = cfn.get_template(StackName=stack)["TemplateBody"]
        template = json.loads(body) if isinstance(body, str) else body
        policy = role_from_template(
            template, function, physical, exports=exports, session_name=function_name
        )
        return policy if iam is None else with_policies_since_deploy(policy, iam)
    raise RoleNotFound(f"no stack on the local cloud holds the function {function_name}")


def for_worker(environ: Mapping[str, str]) -> RolePolicy | None:
    """The role a worker of the local cloud runs with: its function's
    (``AWS_LAMBDA_FUNCTION_NAME``), read from the local cloud (``AWS_ENDPOINT_URL``). None
    for a worker that is not on a local cloud (no endpoint or no function name)."""
    endpoint = environ.get("AWS_ENDPOINT_URL")
    function = environ.get("AWS_LAMBDA_FUNCTION_NAME")
    if not endpoint or not function:
        return None
    from oncecli.aws import local_client

    policy = deployed_role(
        local_client("cloudformation", endpoint, pool=1),
        function,
        local_client("iam", endpoint, pool=1),
    ).prepare()
    for note in policy.notes:
        print(f"once local cloud: role {policy.role_name}: {note}", file=sys.stderr)
    return policy
