"""What differs between dev, prod and local, and how context overrides reach the consumer."""

from __future__ import annotations

import pytest

from infra.app import build_app
from infra.stages import settings_for
from once_cdk import ConfigurationError


def test_stack_is_named_once_dash_stage(synth):
    assert synth.stack.stack_name == f"Once-{synth.stack.settings.stage}"


def test_prod_reserves_concurrency_at_least_the_mappings_maximum(prod):
    _, function = prod.one("AWS::Lambda::Function")
    _, mapping = prod.one("AWS::Lambda::EventSourceMapping")
    reserved = function["Properties"]["ReservedConcurrentExecutions"]
    assert reserved >= mapping["Properties"]["ScalingConfig"]["MaximumConcurrency"]


@pytest.mark.parametrize("stage", ["dev", "local"])
def test_dev_and_local_do_not_reserve_concurrency(request, stage):
    _, function = request.getfixturevalue(stage).one("AWS::Lambda::Function")
    assert "ReservedConcurrentExecutions" not in function["Properties"]


def test_prod_keeps_its_data_and_turns_on_termination_protection(prod, dev):
    assert prod.stack.termination_protection is True
    assert dev.stack.termination_protection is False
    for synth, policy in ((prod, "Retain"), (dev, "Delete")):
        for construct in (synth.consumer.log_group, synth.consumer.table, synth.stack.ledger):
            resource = synth.template["Resources"][synth.logical_id(construct)]
            assert resource["DeletionPolicy"] == policy
    for table in prod.resources("AWS::DynamoDB::Table").values():
        assert table["Properties"]["DeletionProtectionEnabled"] is True


def test_log_retention_follows_the_stage(prod, dev, local):
    for synth, days in ((prod, 90), (dev, 14), (local, 1)):
        assert synth.props(synth.consumer.log_group)["RetentionInDays"] == days


def test_local_stage_redelivers_within_seconds(local):
    queue = local.props(local.consumer.queue)
    assert local.props(local.consumer.function)["Timeout"] <= 5
    assert queue["VisibilityTimeout"] <= 60
    assert queue["RedrivePolicy"]["maxReceiveCount"] == 5


def test_dev_and_prod_derive_ten_receives_for_a_30_second_timeout(dev, prod):
    for synth in (dev, prod):
        assert synth.props(synth.consumer.queue)["RedrivePolicy"]["maxReceiveCount"] == 10


def test_only_the_local_stage_skips_the_bootstrap_version_check(local, dev, prod):
    assert "BootstrapVersion" not in local.template.get("Parameters", {})
    assert "Rules" not in local.template
    for synth in (dev, prod):
        assert "BootstrapVersion" in synth.template["Parameters"]


def test_context_values_from_the_cli_arrive_as_strings_and_are_converted():
    settings = settings_for("dev", {"max_receive_count": "7", "alarm_email": "a@b.example"})
    assert settings.max_receive_count == 7
    assert settings.alarm_email == "a@b.example"
    assert settings.consumer_arguments()["max_receive_count"] == 7


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ({"max_receive_count": "4"}, "max_receive_count=4"),
        ({"max_concurrency": "1"}, "max_concurrency=1"),
        ({"reserved_concurrency": "3", "max_concurrency": "5"}, "reserved_concurrency=3"),
        ({"log_retention_days": "10"}, "log_retention=10"),
        ({"fifo": "true", "max_batching_window_s": "2"}, "on a FIFO queue"),
    ],
)
def test_overrides_that_break_a_rule_stop_the_synth_saying_why(override, message, tmp_path):
    with pytest.raises(ConfigurationError, match=message):
        build_app({"stage": "dev", **override}, str(tmp_path))


def test_an_unknown_stage_is_refused():
    with pytest.raises(ValueError, match="unknown stage"):
        settings_for("staging")
