"""What IAM authorizes for each AWS call: the action, or actions, on which resource.

Why: IAM does not authorize an API call by its name. A ``TransactWriteItems`` needs each
element's own action on its own table, ``SendMessageBatch`` is ``sqs:SendMessage``, an S3
``GetObject`` with a ``VersionId`` is ``s3:GetObjectVersion``, PartiQL is judged by each
statement's verb. This module is that table (``checks``), held to AWS's Service
Authorization Reference by ``tests/unit/localcloud/test_iam_reference.py``; the policy
evaluation that answers each check is ``iam_policy``'s. A call it has no rule for is judged as
``<service>:<Operation>`` on ``*``: nothing passes unjudged.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote

from oncecli.aws import LOCAL_ACCOUNT, LOCAL_REGION
from oncecli.localcloud.arns import event_bus_arn, queue_arn, table_arn


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
    # tests/unit/localcloud/test_iam_reference.py holds this table to it), and deleting one is
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
