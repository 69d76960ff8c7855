"""The template patcher names every part of a stack the local cloud does not run, and why:
queue and topic policies (moto enforces neither), alarms' actions, what refers to a stripped part
(a dashboard, an output), SNS subscriptions of a protocol other than SQS, any type moto's
CloudFormation cannot create. An SQS subscription is not among them: it is kept aside to be
created after the deploy. The emulated event source mapping is a patch, not a part left
out. Queues, tables and functions are never stripped."""

from __future__ import annotations

from typing import Any

import pytest

from oncecli.errors import EngineFailed
from oncecli.localcloud.template import Stripped, patch

QUEUE = {"Type": "AWS::SQS::Queue"}
TOPIC = {"Type": "AWS::SNS::Topic"}


def _subscription(protocol: str, **extra: Any) -> dict[str, Any]:
    return {
        "Type": "AWS::SNS::Subscription",
        "Properties": {
            "Protocol": protocol,
            "TopicArn": {"Ref": "Topic"},
            "Endpoint": {"Fn::GetAtt": ["Queue", "Arn"]}
            if protocol == "sqs"
            else "ops@example.com",
            **extra,
        },
        "DependsOn": ["QueuePolicy"],
    }


def _stripped(resources: dict[str, Any], outputs: dict[str, Any] | None = None) -> list[Stripped]:
    template = {"Resources": {"Queue": QUEUE, "Topic": TOPIC, **resources}}
    if outputs:
        template["Outputs"] = outputs
    patched = patch(template, "Shop")
    for part in patched.stripped:  # each part not run is also a line of the notes
        assert str(part).removeprefix("Shop: ") in patched.notes
        assert part.logical_id not in patched.deployable["Resources"]
    return patched.stripped


@pytest.mark.parametrize(
    ("resource", "meaning"),
    [
        (
            {"Type": "AWS::SQS::QueuePolicy", "Properties": {"Queues": [{"Ref": "Queue"}]}},
            "moto does not enforce queue policies",
        ),
        (
            {"Type": "AWS::SNS::TopicPolicy", "Properties": {"Topics": [{"Ref": "Topic"}]}},
            "moto does not enforce topic policies",
        ),
        ({"Type": "AWS::CloudWatch::Alarm"}, "its actions never run locally"),
        ({"Type": "AWS::Example::Unknown"}, "moto's CloudFormation cannot create it"),
        (_subscription("email"), "SQS protocol only (this one's is email)"),
        (_subscription("lambda"), "SQS protocol only (this one's is lambda)"),
    ],
)
def test_each_kind_of_resource_not_run_is_named_with_what_it_means(
    resource: dict[str, Any], meaning: str
) -> None:
    (part,) = _stripped({"Part": resource})
    assert (part.stack, part.kind, part.logical_id) == ("Shop", resource["Type"], "Part")
    assert meaning in part.why
    assert str(part).startswith(f"Shop: stripped {resource['Type']} Part: ")


def test_what_refers_to_a_stripped_part_is_named_too_outputs_included() -> None:
    stripped = _stripped(
        {
            "Alarm": {"Type": "AWS::CloudWatch::Alarm"},
            "Dashboard": {
                "Type": "AWS::CloudWatch::Dashboard",
                "Properties": {"DashboardBody": {"Fn::Sub": "${Alarm.Arn}"}},
            },
        },
        outputs={"DashboardUrl": {"Value": {"Ref": "Dashboard"}}, "Kept": {"Value": "x"}},
    )
    by_id = {part.logical_id: part for part in stripped}
    assert sorted(by_id) == ["Alarm", "Dashboard", "DashboardUrl"]
    assert by_id["Dashboard"].why == "it refers to Alarm, stripped"
    assert by_id["DashboardUrl"].kind == "Output"
    assert str(by_id["DashboardUrl"]) == (
        "Shop: output DashboardUrl left out: it refers to Dashboard, stripped"
    )


def test_an_sqs_subscription_is_kept_aside_to_be_created_not_named_as_left_out() -> None:
    template = {
        "Resources": {
            "Queue": QUEUE,
            "Topic": TOPIC,
            "QueuePolicy": {"Type": "AWS::SQS::QueuePolicy"},
            "Sub": _subscription("sqs", RawMessageDelivery=True),
        }
    }
    patched = patch(template, "Shop")
    assert "Sub" not in patched.deployable["Resources"]
    ((subscription),) = patched.subscriptions
    assert subscription.logical_id == "Sub"
    assert subscription.properties["RawMessageDelivery"] is True
    # Its queue's policy is named as not run; the subscription itself is not.
    assert [part.logical_id for part in patched.stripped] == ["QueuePolicy"]
    assert not any("Sub" in note for note in patched.notes)


def test_the_emulated_mapping_is_a_patch_and_queues_and_functions_stay() -> None:
    template = {
        "Resources": {
            "Queue": QUEUE,
            "Function": {"Type": "AWS::Lambda::Function"},
            "Mapping": {
                "Type": "AWS::Lambda::EventSourceMapping",
                "Properties": {"FunctionName": {"Ref": "Function"}},
            },
        }
    }
    patched = patch(template, "Shop")
    assert patched.stripped == []
    assert sorted(patched.deployable["Resources"]) == ["Function", "Queue"]
    assert any(
        note.startswith("stripped AWS::Lambda::EventSourceMapping") for note in patched.notes
    )


def test_a_queue_that_refers_to_a_part_not_run_fails_the_deploy() -> None:
    template = {
        "Resources": {
            "Alarm": {"Type": "AWS::CloudWatch::Alarm"},
            "Queue": {"Type": "AWS::SQS::Queue", "DependsOn": "Alarm"},
        }
    }
    with pytest.raises(EngineFailed, match="Queue refers to"):
        patch(template, "Shop")
