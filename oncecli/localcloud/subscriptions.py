"""SNS subscriptions with the SQS protocol, created through SNS's API after the deploy.

Why: moto's CloudFormation cannot create ``AWS::SNS::Subscription``, so a stack whose queue
is fed by a topic (CDK's ``topic.add_subscription(SqsSubscription(queue))``) would deploy
without the subscription and a publish would reach no queue. The template patcher strips
each one (``template.Subscription``); once the stack is deployed this module resolves its
properties against the stack's physical resources (``resolve.deployed``: the topic's ARN,
the queue's ARN) and calls ``Subscribe`` on moto's SNS with its attributes:
``RawMessageDelivery`` (CDK sets it only when raw delivery is on), ``FilterPolicy`` and
``FilterPolicyScope``, ``RedrivePolicy`` and ``DeliveryPolicy``. moto's SNS then delivers a
publish to the queue as SNS does: in SNS's JSON envelope, or raw, filtered by the policy.

A subscription whose properties refer to what the local cloud cannot resolve (an intrinsic
function, or an attribute, ``resolve`` has no rule for: its resolver raises) is not created,
and is named as not run (``template.Stripped``). One that SNS refuses (a FIFO queue on a
standard topic, a bad filter policy) fails the deploy, as it fails CloudFormation's.
"""

from __future__ import annotations

import json
from typing import Any

from botocore.exceptions import ClientError

from oncecli.errors import EngineFailed
from oncecli.localcloud import resolve
from oncecli.localcloud.resolve import Unresolvable
from oncecli.localcloud.template import Stripped, Subscription

#: Subscription properties passed to ``Subscribe`` as attributes (JSON ones as JSON text).
_ATTRIBUTES = ("RawMessageDelivery", "FilterPolicyScope", "FilterPolicy", "RedrivePolicy",
               "DeliveryPolicy")  # fmt: skip
#: Properties that are the call itself, not attributes.
_CALL = ("TopicArn", "Endpoint", "Protocol")


def _attribute(name: str, value: Any) -> str:
    if name == "RawMessageDelivery":
        return "true" if str(value).lower() == "true" else "false"
    return value if isinstance(value, str) else json.dumps(value)


def create(
    stack: str,
    subscriptions: list[Subscription],
    resolver: resolve.Resolver,
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
