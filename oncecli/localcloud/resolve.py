"""CloudFormation's intrinsic functions, resolved against a stack the local cloud deployed.

Why: three jobs of the local cloud read a template's values after the deploy, each of which
moto's CloudFormation cannot do for it: a role's policies (``roles``: the ARNs its grants
name), an SNS subscription's properties (``subscriptions``) and an alarm's (``alarms``).
They read the same template the same way, so the rule lives here once: ``Ref`` (a resource's
physical id, a parameter's ``Default``, the pseudo parameters), ``Fn::GetAtt`` (the
attributes in ``_ATTRIBUTES``, computed from the physical id, or read from the cloud where
the caller says how), ``Fn::ImportValue``, ``Fn::Join``, ``Fn::Sub``, ``Fn::Select`` and
``Fn::Split``. Anything else (``Fn::If``, a ``Condition``, an attribute not listed, a
resource deployed without a physical id) cannot be resolved.

What then is the caller's choice, made explicitly when it builds its resolver
(``unresolved=``):

- ``RAISE``: ``Unresolvable`` is raised; a subscription or an alarm that needs the value is
  not created and is named as not run.
- ``NAME``: the value stands as ``arn:unresolved:<what>``, which matches no resource, and a
  note names it (``Resolver.notes``); a role's grant on it allows nothing, and the rest of
  the role stands.

Which logical ids a fragment refers to (``references``: what the template patcher must
strip with a resource it strips) reads the same functions, and lives here too.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from enum import Enum
from typing import Any

from oncecli.aws import LOCAL_ACCOUNT, LOCAL_REGION
from oncecli.localcloud.arns import event_bus_arn, queue_arn, table_arn


class Unresolved(Enum):
    """What a resolver does with a value it cannot resolve."""

    RAISE = "raise"  #: raise ``Unresolvable``
    NAME = "name"  #: stand as ``arn:unresolved:<what>`` (matches nothing) and note it


RAISE, NAME = Unresolved.RAISE, Unresolved.NAME

#: What an unresolved value stands as under ``NAME``: an ARN no resource has.
PLACEHOLDER = "arn:unresolved"


class Unresolvable(Exception):
    """A template value the local cloud cannot resolve: why, and ``what`` (``Bus.Arn``,
    ``Fn::If``)."""

    def __init__(self, message: str, what: str = "") -> None:
        super().__init__(message)
        self.what = what


def pseudo_parameters(
    account: str = LOCAL_ACCOUNT, region: str = LOCAL_REGION, stack: str | None = None
) -> dict[str, str]:
    """The pseudo parameters the local cloud knows, by name (``AWS::StackName`` with a
    stack)."""
    found = {
        "AWS::AccountId": account,
        "AWS::Region": region,
        "AWS::Partition": "aws",
        "AWS::URLSuffix": "amazonaws.com",
        "AWS::NoValue": "",
    }
    if stack is not None:
        found["AWS::StackName"] = stack
    return found


#: ``(physical id, account, region)`` to the attribute's value.
Attribute = Callable[[str, str, str], str]

#: The attributes ``Fn::GetAtt`` resolves, by resource type, computed from the physical id
#: (what ``Ref`` gives: a table's name, a queue's URL, a topic's ARN...).
_ATTRIBUTES: dict[str, dict[str, Attribute]] = {
    "AWS::DynamoDB::Table": {
        "Arn": lambda p, a, r: table_arn(p, a, r),
        "StreamArn": lambda p, a, r: f"{table_arn(p, a, r)}/stream/*",
    },
    "AWS::SQS::Queue": {
        "Arn": lambda p, a, r: queue_arn(p, a, r),
        "QueueName": lambda p, a, r: p.rstrip("/").rsplit("/", 1)[-1],
        "QueueUrl": lambda p, a, r: p,
    },
    "AWS::SNS::Topic": {
        "TopicArn": lambda p, a, r: p,
        "TopicName": lambda p, a, r: p.rsplit(":", 1)[-1],
    },
    "AWS::Logs::LogGroup": {"Arn": lambda p, a, r: f"arn:aws:logs:{r}:{a}:log-group:{p}:*"},
    "AWS::KMS::Key": {
        "Arn": lambda p, a, r: p if p.startswith("arn:") else f"arn:aws:kms:{r}:{a}:key/{p}",
        "KeyId": lambda p, a, r: p,
    },
    "AWS::IAM::Role": {"Arn": lambda p, a, r: f"arn:aws:iam::{a}:role/{p}"},
    "AWS::Lambda::Function": {"Arn": lambda p, a, r: f"arn:aws:lambda:{r}:{a}:function:{p}"},
    "AWS::S3::Bucket": {"Arn": lambda p, a, r: f"arn:aws:s3:::{p}"},
    "AWS::Kinesis::Stream": {"Arn": lambda p, a, r: f"arn:aws:kinesis:{r}:{a}:stream/{p}"},
    "AWS::Events::EventBus": {
        "Arn": lambda p, a, r: event_bus_arn(p, a, r),
        "Name": lambda p, a, r: p,
    },
    "AWS::SSM::Parameter": {
        "Arn": lambda p, a, r: f"arn:aws:ssm:{r}:{a}:parameter/{p.lstrip('/')}"
    },
}

#: A mapping given, or read when first needed (from the deployed cloud).
Source = Mapping[str, str] | Callable[[], Mapping[str, str]]


class Resolver:
    """Resolves a template's values to what the deploy made of them (``physical``: logical
    id to physical id; ``exports``: every stack's exports by name). ``read`` overrides how
    an attribute is found, by (type, attribute), from the physical id (a queue's ``Arn``
    asked of SQS). ``unresolved``: the caller's choice for what cannot be resolved."""

    def __init__(
        self,
        template: Mapping[str, Any],
        physical: Source,
        *,
        unresolved: Unresolved,
        exports: Source | None = None,
        stack: str | None = None,
        account: str = LOCAL_ACCOUNT,
        region: str = LOCAL_REGION,
        read: Mapping[tuple[str, str], Callable[[str], str]] | None = None,
    ) -> None:
        self._template = template
        self._physical_source = physical
        self._exports_source: Source = exports if exports is not None else {}
        self._physical: Mapping[str, str] | None = None
        self._exports: Mapping[str, str] | None = None
        self._read = dict(read or {})
        self.unresolved = unresolved
        self.stack = stack
        self.account = account
        self.region = region
        #: Under ``NAME``: a note for each value that stands unresolved, in order.
        self.notes: list[str] = []

    # --- what cannot be resolved: the one policy -------------------------------------------
    def _cannot(self, what: str, message: str) -> str:
        if self.unresolved is RAISE:
            raise Unresolvable(message, what)
        self.notes.append(f"{message}: matches nothing")
        return f"{PLACEHOLDER}:{what}"

    # --- the stack -----------------------------------------------------------------------
    def physical(self, logical_id: str) -> str | None:
        """The physical id the deploy gave ``logical_id``; None if it has none (not a
        resource, or deployed without one)."""
        if self._physical is None:
            source = self._physical_source
            self._physical = source() if callable(source) else source
        return self._physical.get(logical_id) or None

    def _export(self, name: str) -> str:
        if self._exports is None:
            source = self._exports_source
            self._exports = source() if callable(source) else source
        if name in self._exports:
            return self._exports[name]
        return self._cannot(name, f"Fn::ImportValue {name} not resolved: no stack exports it")

    # --- the functions -------------------------------------------------------------------
    def ref(self, name: str) -> str:
        pseudo = pseudo_parameters(self.account, self.region, self.stack)
        if name in pseudo:
            return pseudo[name]
        parameter = (self._template.get("Parameters") or {}).get(name)
        if isinstance(parameter, Mapping) and "Default" in parameter:
            return str(parameter["Default"])
        found = self.physical(name)
        if found is not None:
            return found
        where = f" of {self.stack}" if self.stack else ""
        return self._cannot(
            name,
            f"Ref {name} not resolved: {name} is not a deployed resource{where} with a physical id",
        )

    def get_att(self, name: str, attribute: str) -> str:
        what = f"{name}.{attribute}"
        kind = str(((self._template.get("Resources") or {}).get(name) or {}).get("Type", ""))
        phys = self.physical(name)
        if phys is None:  # not deployed, or deployed without a physical id
            return self._cannot(what, f"Fn::GetAtt {what} not resolved: no physical id")
        # Each attribute computed only when asked: one type's reading of a physical id must
        # not fail another's (a queue's URL parsed out of a bus's name).
        read = self._read.get((kind, attribute))
        compute = _ATTRIBUTES.get(kind, {}).get(attribute)
        if read is not None or compute is not None:
            try:
                if read is not None:
                    return read(phys)
                assert compute is not None
                return compute(phys, self.account, self.region)
            except (IndexError, ValueError) as error:
                return self._cannot(
                    what, f"Fn::GetAtt {what} ({kind}) not resolved from {phys!r} ({error})"
                )
        if attribute in ("Arn", "Id") and phys.startswith("arn:"):
            return phys
        return self._cannot(what, f"Fn::GetAtt {what} ({kind}) not resolved")

    def _sub(self, text: str, variables: Mapping[str, Any]) -> str:
        def value(found: re.Match[str]) -> str:
            name = found.group(1)
            if name in variables:
                return str(self.resolve(variables[name]))
            if "." in name and not name.startswith("AWS::"):
                return self.get_att(*name.split(".", 1))
            return self.ref(name)

        # ``${!Literal}`` is the literal ``${Literal}``.
        return re.sub(r"\$\{(?!!)([^}]+)\}", value, text).replace("${!", "${")

    def resolve(self, node: Any) -> Any:
        """The value of a template fragment, with every intrinsic function resolved."""
        if isinstance(node, list):
            return [self.resolve(item) for item in node]
        if not isinstance(node, dict):
            return node
        if len(node) != 1:
            return {key: self.resolve(value) for key, value in node.items()}
        ((key, arg),) = node.items()
        if key == "Ref":
            return self.ref(str(arg))
        if key == "Fn::GetAtt":
            name, attribute = arg if isinstance(arg, list) else str(arg).split(".", 1)
            return self.get_att(str(name), str(self.resolve(attribute)))
        if key == "Fn::ImportValue":
            return self._export(str(self.resolve(arg)))
        if key == "Fn::Join":
            separator, items = arg
            return str(separator).join(str(item) for item in self.resolve(items))
        if key == "Fn::Sub":
            text, variables = (arg, {}) if isinstance(arg, str) else arg
            return self._sub(str(text), variables)
        if key == "Fn::Select":
            index, items = arg
            chosen, values = int(self.resolve(index)), self.resolve(items)
            unresolved = next((v for v in _flat(values) if _is_placeholder(v)), None)
            if unresolved is not None:
                return unresolved  # a part of what is not resolved is not resolved either
            if not isinstance(values, list) or not 0 <= chosen < len(values):
                return self._cannot(key, f"Fn::Select {chosen} of {len(values)} values")
            return values[chosen]
        if key == "Fn::Split":
            separator, text = arg
            value = str(self.resolve(text))
            return [value] if _is_placeholder(value) else value.split(separator)
        if key.startswith("Fn::") or key == "Condition":
            return self._cannot(key, f"{key} not resolved: the local cloud has no rule for it")
        return {key: self.resolve(arg)}

    __call__ = resolve


def _is_placeholder(value: Any) -> bool:
    """What ``NAME`` answers for a value it cannot resolve (``PLACEHOLDER:<what>``)."""
    return isinstance(value, str) and value.startswith(f"{PLACEHOLDER}:")


def _flat(values: Any) -> list[Any]:
    return values if isinstance(values, list) else [values]


def deployed(
    stack: str,
    template: Mapping[str, Any],
    cfn: Any,
    sqs: Any,
    *,
    unresolved: Unresolved,
) -> Resolver:
    """The resolver of ``stack`` as the local cloud deployed it, read when first needed
    through ``cfn`` (its CloudFormation: the resources' physical ids, every stack's
    exports) and ``sqs`` (a queue's ``Arn``, as SQS answers it)."""

    def physical() -> dict[str, str]:
        resources = cfn.describe_stack_resources(StackName=stack)
        # A resource moto deployed without a physical id is left out: only what refers to
        # it cannot be resolved, never the rest of the stack.
        return {
            r["LogicalResourceId"]: r["PhysicalResourceId"]
            for r in resources["StackResources"]
            if r.get("PhysicalResourceId")
        }

    def exports() -> dict[str, str]:
        found: dict[str, str] = {}
        for page in cfn.get_paginator("list_exports").paginate():
            found.update({e["Name"]: e["Value"] for e in page["Exports"]})
        return found

    def queue_arn_of(url: str) -> str:
        got = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])
        return str(got["Attributes"]["QueueArn"])

    return Resolver(
        template,
        physical,
        unresolved=unresolved,
        exports=exports,
        stack=stack,
        read={("AWS::SQS::Queue", "Arn"): queue_arn_of},
    )


def references(node: Any) -> set[str]:
    """Logical ids a template fragment refers to (Ref, Fn::GetAtt, Fn::Sub, DependsOn)."""
    found: set[str] = set()
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "Ref" and isinstance(value, str):
                found.add(value)
            elif key == "Fn::GetAtt":
                found.add(value[0] if isinstance(value, list) else str(value).split(".")[0])
            elif key == "Fn::Sub":
                text = value[0] if isinstance(value, list) else value
                found.update(re.findall(r"\$\{([A-Za-z0-9]+)[.}]", text))
            if key == "DependsOn":
                found.update([value] if isinstance(value, str) else value)
            else:
                found |= references(value)
    elif isinstance(node, list):
        for value in node:
            found |= references(value)
    return found
