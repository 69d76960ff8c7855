"""Each function runs with its own role: every AWS call a worker makes is judged first.

Why: on AWS a function can do what its role grants and nothing more, and a grant that is
missing (a ``ConditionCheck`` staged on a table granted only ``grant_write_data``, a DLQ the
role cannot send to) fails only once deployed. The local cloud holds the function to the
same rule, for once's calls and the business code's alike: the worker process reads its
function's role from the deployed stack (``for_worker``) and ``enforce`` judges each call
its clients make, boto3's or botocore's, before it is sent.

This module reads the role; the rest of IAM's emulation stands beside it, one job each:

- **The role's identity policies, as the template grants them** (here): the role's own
  ``Policies``, every ``AWS::IAM::Policy`` and ``AWS::IAM::ManagedPolicy`` that names it,
  and its ``ManagedPolicyArns`` (AWS's managed policies, such as
  ``service-role/AWSLambdaBasicExecutionRole``, from the documents moto ships). ``Ref`` and
  ``Fn::GetAtt`` of the stack's tables, queues, topics... are resolved (``resolve``, naming
  what it cannot: a grant on it matches nothing) to the physical names the local deploy
  gave them (``list_stack_resources``); ``Fn::ImportValue`` to the exports of the other
  stacks. What was put on or attached to the role through IAM since the deploy counts too,
  for a worker started after it (``with_policies_since_deploy``).
- **Per action, as IAM authorizes each API** (``iam_actions.checks``).
- **By moto's IAM policy engine, refused as AWS refuses** (``iam_policy.RolePolicy``).
- **On every client of the process** (``iam_enforce.enforce``, the botocore hook).

Not judged (``docs/localcloud.md``): resource policies (queue and topic policies are
stripped from the local deploy), KMS key grants of an encrypted queue or topic, a
statement's ``Condition`` (an Allow with one is taken as unconditional, a Deny with one is
left out), ``NotResource``, permission boundaries and SCPs.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import sys
from collections.abc import Mapping
from typing import Any

from oncecli.aws import LOCAL_ACCOUNT, LOCAL_REGION
from oncecli.localcloud.iam_actions import EXACT_SERVICES, Check, checks, iam_prefix
from oncecli.localcloud.iam_enforce import enforce
from oncecli.localcloud.iam_policy import Denial, RolePolicy, as_list
from oncecli.localcloud.resolve import NAME, Resolver

__all__ = [
    "EXACT_SERVICES",
    "Check",
    "Denial",
    "RoleNotFound",
    "RolePolicy",
    "aws_managed_policy",
    "checks",
    "deployed_role",
    "enforce",
    "for_worker",
    "iam_prefix",
    "role_from_template",
    "with_policies_since_deploy",
]


# --- the role as the template grants it --------------------------------------------------------


class RoleNotFound(LookupError):
    """The function's role is not one the stack's template defines."""


def _names_role(roles: Any, role_id: str) -> bool:
    return any(r == {"Ref": role_id} or r == role_id for r in as_list(roles or []))


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
    stack: str | None = None,
) -> RolePolicy:
    """The role of the template's function ``function`` (its logical id), as the template
    grants it, with each resource named by ``physical`` (logical id to physical id: a
    table's name, a queue's URL, a topic's ARN...); ``stack``: its stack's name, for
    ``AWS::StackName``."""
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
    # A grant on what cannot be resolved allows nothing; the rest of the role stands.
    resolve = Resolver(
        template,
        physical,
        unresolved=NAME,
        exports=exports,
        account=account,
        region=region,
        stack=stack,
    )
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
            template, function, physical, exports=exports, session_name=function_name, stack=stack
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
