"""A role's identity policies, evaluated as IAM evaluates them, and AWS's refusal.

Why: a function on AWS can do what its role grants and nothing more. ``RolePolicy`` holds a
role's policy documents (their resources resolved to the deployed stack's ARNs) and judges
each check ``iam_actions.checks`` names by moto's IAM policy engine
(``moto.iam.access_control.IAMPolicy``): an explicit Deny wins, an Allow is needed, nothing
else allows (AWS's evaluation for one account without resource policies, boundaries or
SCPs). A call it refuses is answered as the service answers it (``Denial``): the code and
status (``AccessDeniedException`` for DynamoDB, ``AccessDenied`` for SQS and CloudWatch,
``AuthorizationError`` for SNS) and AWS's message, "User:
arn:aws:sts::<account>:assumed-role/<role>/<function> is not authorized to perform:
<action> on resource: <arn> because no identity-based policy allows the <action> action".

Not judged (``docs/localcloud.md``): a statement's ``Condition`` (an Allow with one is
taken as unconditional, a Deny with one is left out), ``NotResource``, resource policies,
permission boundaries and SCPs.
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import Any

from oncecli.aws import LOCAL_ACCOUNT, LOCAL_REGION
from oncecli.localcloud.iam_actions import Check, checks, iam_prefix
from oncecli.localcloud.iam_enforce import enforce

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


def as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def _for_moto(document: Mapping[str, Any]) -> str:
    """A policy document as moto's engine judges it faithfully: actions matched without
    case (IAM's rule: moto's matcher keeps case), resource wildcards as IAM reads them; a
    Deny with a ``Condition`` left out and an Allow's ``Condition`` dropped (moto cannot
    evaluate a condition without the request's context, and answers DENIED for any)."""
    statements = []
    for statement in as_list(document.get("Statement") or []):
        if not isinstance(statement, dict):
            continue
        if statement.get("Condition") and statement.get("Effect") == "Deny":
            continue
        kept = {k: v for k, v in statement.items() if k != "Condition"}
        for key in ("Action", "NotAction"):
            if key in kept:
                kept[key] = [str(a).lower() for a in as_list(kept[key])]
        if "Resource" in kept:
            kept["Resource"] = [_iam_pattern(str(r)) for r in as_list(kept["Resource"])]
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
