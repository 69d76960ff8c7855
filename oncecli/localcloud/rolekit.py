"""A function's role in a test: what its synthesized template grants, judged as IAM would.

Why: a grant that is missing (a ``ConditionCheck`` staged on a table granted with
``grant_write_data``, a topic the role cannot publish to) fails only once deployed. The local
cloud holds each function to its role (``oncecli.localcloud.roles``; the evaluation lives in
``iam_policy``); this module reads a role from a synthesized template for a test, so that a
team's tests hold business code to the same rules (``once_env.role = role_of(...)``, or)::

    from oncecli.localcloud.rolekit import enforce, role_of

    role = role_of(template, names={"LedgerB7379752": "Ledger"})  # the synthesized JSON
    assert role.authorize("dynamodb", "TransactWriteItems", {...}) is None
    with enforce(role):      # every client of this process, boto3's or botocore's
        handler(event, context)

``role_of`` reads the role of the template's function, as the template grants it: the role's
own policies, each ``AWS::IAM::Policy`` and ``AWS::IAM::ManagedPolicy`` naming it, and its
managed policy ARNs (AWS's, from the documents moto ships). The resources a test did not
name get the name CloudFormation would give them from the template alone (a table's
``TableName``, else its logical id; a queue's URL and a topic's ARN built from that name).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from oncecli.aws import LOCAL_ACCOUNT, LOCAL_REGION
from oncecli.localcloud.iam_actions import EXACT_SERVICES, Check, checks
from oncecli.localcloud.iam_enforce import enforce
from oncecli.localcloud.iam_policy import Denial, RolePolicy
from oncecli.localcloud.roles import RoleNotFound, role_from_template

__all__ = [
    "EXACT_SERVICES",
    "Check",
    "Denial",
    "RoleNotFound",
    "RolePolicy",
    "checks",
    "default_physical_id",
    "enforce",
    "role_of",
]

#: The property that names a resource of each type, where the template may set it.
_NAME_PROPERTY = {
    "AWS::DynamoDB::Table": "TableName",
    "AWS::SQS::Queue": "QueueName",
    "AWS::SNS::Topic": "TopicName",
    "AWS::Logs::LogGroup": "LogGroupName",
    "AWS::IAM::Role": "RoleName",
    "AWS::Lambda::Function": "FunctionName",
    "AWS::S3::Bucket": "BucketName",
    "AWS::Kinesis::Stream": "Name",
    "AWS::Events::EventBus": "Name",
    "AWS::SSM::Parameter": "Name",
}


def default_physical_id(
    logical_id: str,
    resource: Mapping[str, Any],
    *,
    account: str = LOCAL_ACCOUNT,
    region: str = LOCAL_REGION,
) -> str:
    """The physical id a resource gets when the test does not name it: the name the
    template gives it (else its logical id), as its type's ``Ref`` answers (a queue's URL,
    a topic's ARN, a table's name)."""
    kind = resource.get("Type", "")
    given = (resource.get("Properties") or {}).get(_NAME_PROPERTY.get(kind, ""))
    name = given if isinstance(given, str) else logical_id
    if kind == "AWS::SQS::Queue":
        return f"https://sqs.{region}.amazonaws.com/{account}/{name}"
    if kind == "AWS::SNS::Topic":
        return f"arn:aws:sns:{region}:{account}:{name}"
    return name


def role_of(
    template: Mapping[str, Any],
    function: str | None = None,
    *,
    names: Mapping[str, str] | None = None,
    account: str = LOCAL_ACCOUNT,
    region: str = LOCAL_REGION,
    exports: Mapping[str, str] | None = None,
) -> RolePolicy:
    """The role of ``function`` (its logical id; default: the template's only
    ``AWS::Lambda::Function``) as the synthesized ``template`` grants it; ``names`` gives
    the physical id of a resource by its logical id (a table's name, a queue's URL, a
    topic's ARN), the others get ``default_physical_id``."""
    resources: Mapping[str, Any] = template.get("Resources") or {}
    if function is None:
        functions = [k for k, r in resources.items() if r.get("Type") == "AWS::Lambda::Function"]
        if len(functions) != 1:
            raise ValueError(
                f"the template has {len(functions)} functions ({', '.join(functions)}): "
                "name one by its logical id"
            )
        (function,) = functions
    physical = {
        logical_id: default_physical_id(logical_id, resource, account=account, region=region)
        for logical_id, resource in resources.items()
    }
    physical.update(names or {})
    return role_from_template(
        template, function, physical, account=account, region=region, exports=exports
    )
