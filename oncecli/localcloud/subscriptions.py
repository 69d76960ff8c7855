"""SNS subscriptions with the SQS protocol, created through SNS's API after the deploy.

Why: moto's CloudFormation cannot create ``AWS::SNS::Subscription``, so a stack whose queue
is fed by a topic (CDK's ``topic.add_subscription(SqsSubscription(queue))``) would deploy
without the subscription and a publish would reach no queue. The template patcher strips
each one (``template.Subscription``); once the stack is deployed this module resolves its
properties against the stack's physical resources (``describe_stack_resources``: the topic's
ARN, the queue's ARN) and calls ``Subscribe`` on moto's SNS with its attributes:
``RawMessageDelivery`` (CDK sets it only when raw delivery is on), ``FilterPolicy`` and
``FilterPolicyScope``, ``RedrivePolicy`` and ``DeliveryPolicy``. moto's SNS then delivers a
publish to the queue as SNS does: in SNS's JSON envelope, or raw, filtered by the policy.

A subscription whose properties refer to what the local cloud cannot resolve (an intrinsic
function, or an attribute, not listed in ``Resolver``) is not created, and is named as not
run (``template.Stripped``). One that SNS refuses (a FIFO queue on a standard topic, a bad
filter policy) fails the deploy, as it fails CloudFormation's.
"""

from __future__ import annotations

import json
import re
from typing import Any

from botocore.exceptions import ClientError

from oncecli.aws import LOCAL_ACCOUNT, LOCAL_REGION
from oncecli.errors import EngineFailed
from oncecli.localcloud.template import Stripped, Subscription

#: Subscription properties passed to ``Subscribe`` as attributes (JSON ones as JSON text).
_ATTRIBUTES = ("RawMessageDelivery", "FilterPolicyScope", "FilterPolicy", "RedrivePolicy",
               "DeliveryPolicy")  # fmt: skip
#: Properties that are the call itself, not attributes.
_CALL = ("TopicArn", "Endpoint", "Protocol")


class Unresolvable(Exception):
    """A template value the local cloud cannot resolve."""


class Resolver:
    """Resolves template values of a deployed stack: ``Ref``, ``Fn::GetAtt`` (a queue's
    ``Arn``, ``QueueUrl`` and ``QueueName``, a topic's ``TopicArn`` and ``TopicName``),
    ``Fn::ImportValue``, ``Fn::Join``, ``Fn::Sub``, ``Fn::Select``, ``Fn::Split``, and the
    pseudo parameters."""

    def __init__(self, stack: str, template: dict[str, Any], cfn: Any, sqs: Any) -> None:
        self._stack = stack
        self._template = template
        self._cfn = cfn
        self._sqs = sqs
        self._physical: dict[str, str] | None = None
        self._exports: dict[str, str] | None = None

    def physical(self, logical_id: str) -> str:
        if self._physical is None:
            resources = self._cfn.describe_stack_resources(StackName=self._stack)
            # A resource moto deployed without a physical id is left out: only what refers
            # to it cannot be resolved, never the rest of the stack.
            self._physical = {
                r["LogicalResourceId"]: r["PhysicalResourceId"]
                for r in resources["StackResources"]
                if r.get("PhysicalResourceId")
            }
        if logical_id not in self._physical:
            raise Unresolvable(
                f"{logical_id} is not a deployed resource of {self._stack} with a physical id"
            )
        return self._physical[logical_id]

    def _pseudo(self, name: str) -> str | None:
        return {
            "AWS::Region": LOCAL_REGION,
            "AWS::AccountId": LOCAL_ACCOUNT,
            "AWS::Partition": "aws",
            "AWS::URLSuffix": "amazonaws.com",
            "AWS::StackName": self._stack,
        }.get(name)

    def _ref(self, name: str) -> str:
        pseudo = self._pseudo(name)
        if pseudo is not None:
            return pseudo
        parameter = self._template.get("Parameters", {}).get(name)
        if parameter is not None and "Default" in parameter:
            return str(parameter["Default"])
        return self.physical(name)

    def _get_att(self, logical_id: str, attribute: str) -> str:
        kind = self._template.get("Resources", {}).get(logical_id, {}).get("Type")
        physical = self.physical(logical_id)
        if kind == "AWS::SQS::Queue":
            if attribute == "Arn":
                return str(
                    self._sqs.get_queue_attributes(QueueUrl=physical, AttributeNames=["QueueArn"])[
                        "Attributes"
                    ]["QueueArn"]
                )
            if attribute == "QueueUrl":
                return physical
            if attribute == "QueueName":
                return physical.rsplit("/", 1)[-1]
        if kind == "AWS::SNS::Topic":
            if attribute == "TopicArn":
                return physical
            if attribute == "TopicName":
                return physical.rsplit(":", 1)[-1]
        raise Unresolvable(f"Fn::GetAtt {logical_id}.{attribute} ({kind})")

    def _export(self, name: str) -> str:
        if self._exports is None:
            self._exports = {}
            for page in self._cfn.get_paginator("list_exports").paginate():
                self._exports.update({e["Name"]: e["Value"] for e in page["Exports"]})
        if name not in self._exports:
            raise Unresolvable(f"no stack exports {name}")
        return self._exports[name]

    def _sub(self, text: str, variables: dict[str, Any]) -> str:
        def value(match: re.Match[str]) -> str:
            name = match.group(1)
            if name in variables:
                return str(self.resolve(variables[name]))
            if "." in name and not name.startswith("AWS::"):
                return self._get_att(*name.split(".", 1))
            return self._ref(name)

        return re.sub(r"\$\{(?!!)([^}]+)\}", value, text).replace("${!", "${")

    def resolve(self, node: Any) -> Any:
        """The value of a template fragment, with every intrinsic function resolved."""
        if isinstance(node, list):
            return [self.resolve(item) for item in node]
        if not isinstance(node, dict):
            return node
        if len(node) == 1:
            ((key, value),) = node.items()
            if key == "Ref":
                return self._ref(str(value))
            if key == "Fn::GetAtt":
                parts = value if isinstance(value, list) else str(value).split(".", 1)
                return self._get_att(str(parts[0]), str(self.resolve(parts[1])))
            if key == "Fn::ImportValue":
                return self._export(str(self.resolve(value)))
            if key == "Fn::Join":
                separator, items = value
                return str(separator).join(str(i) for i in self.resolve(items))
            if key == "Fn::Sub":
                text, variables = (value, {}) if isinstance(value, str) else value
                return self._sub(text, variables)
            if key == "Fn::Select":
                index, items = value
                return self.resolve(items)[int(self.resolve(index))]
            if key == "Fn::Split":
                separator, text = value
                return str(self.resolve(text)).split(separator)
            if key.startswith("Fn::") or key == "Condition":
                raise Unresolvable(key)
        return {key: self.resolve(value) for key, value in node.items()}


def _attribute(name: str, value: Any) -> str:
    if name == "RawMessageDelivery":
        return "true" if str(value).lower() == "true" else "false"
    return value if isinstance(value, str) else json.dumps(value)


def create(
    stack: str,
    subscriptions: list[Subscription],
    resolver: Resolver,
    sns: Any,
) -> tuple[list[str], list[Stripped]]:
    """Subscribe each SQS subscription of a deployed stack; return a note for each one
    created and what could not be."""
    notes: list[str] = []
    left_out: list[Stripped] = []
    for subscription in subscriptions:
        properties = subscription.properties
        try:
            topic = str(resolver.resolve(properties.get("TopicArn")))
            endpoint = str(resolver.resolve(properties.get("Endpoint")))
            attributes = {
                name: _attribute(name, resolver.resolve(properties[name]))
                for name in _ATTRIBUTES
                if properties.get(name) is not None
            }
        except (Unresolvable, ValueError, TypeError, IndexError) as error:
            left_out.append(
                Stripped(
                    stack,
                    "AWS::SNS::Subscription",
                    subscription.logical_id,
                    f"moto's CloudFormation cannot create it, and the local cloud cannot "
                    f"resolve its properties ({error}): nothing is delivered to it",
                )
            )
            continue
        try:
            sns.subscribe(
                TopicArn=topic, Protocol="sqs", Endpoint=endpoint, Attributes=attributes,
                ReturnSubscriptionArn=True,
            )  # fmt: skip
        except ClientError as error:
            raise EngineFailed(
                f"the local deploy of {stack} failed: SNS refused the subscription "
                f"{subscription.logical_id} of {endpoint} to {topic}: {error}"
            ) from error
        ignored = sorted(set(properties) - {*_ATTRIBUTES, *_CALL})
        raw = attributes.get("RawMessageDelivery") == "true"
        notes.append(
            f"SNS subscription {subscription.logical_id} ({topic.rsplit(':', 1)[-1]} to "
            f"{endpoint.rsplit(':', 1)[-1]}, raw delivery {'on' if raw else 'off'}"
            + (", filter policy" if "FilterPolicy" in attributes else "")
            + ") created through SNS's API (moto's CloudFormation cannot create it)"
            + (f"; not applied: {', '.join(ignored)}" if ignored else "")
        )
    return notes, left_out
