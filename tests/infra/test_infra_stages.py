"""What differs between dev, prod and local, and the rules every stage's settings obey."""

from __future__ import annotations

import pytest

from infra.stages import StageSettings, settings_for
from once import constants as c


def test_stack_is_named_once_dash_stage(synth):
    assert synth.stack.stack_name == f"Once-{synth.stage}"


def test_prod_reserves_concurrency_at_least_the_mappings_maximum(prod):
    _, function = prod.one("AWS::Lambda::Function")
    _, mapping = prod.one("AWS::Lambda::EventSourceMapping")
    reserved = function["Properties"]["ReservedConcurrentExecutions"]
    assert reserved >= mapping["Properties"]["ScalingConfig"]["MaximumConcurrency"]


@pytest.mark.parametrize("stage", ["dev", "local"])
def test_dev_and_local_do_not_reserve_concurrency(request, stage):
    _, function = request.getfixturevalue(stage).one("AWS::Lambda::Function")
    assert "ReservedConcurrentExecutions" not in function["Properties"]


def test_prod_turns_on_termination_protection_and_retains_logs(prod, dev):
    assert prod.stack.termination_protection is True
    assert dev.stack.termination_protection is False
    _, prod_logs = prod.one("AWS::Logs::LogGroup")
    _, dev_logs = dev.one("AWS::Logs::LogGroup")
    assert prod_logs["DeletionPolicy"] == "Retain"
    assert dev_logs["DeletionPolicy"] == "Delete"


def test_local_stage_redelivers_within_seconds(local):
    _, function = local.one("AWS::Lambda::Function")
    source_id = local.logical_id(local.stack.queues.source)
    source = local.template["Resources"][source_id]["Properties"]
    assert function["Properties"]["Timeout"] <= 5
    assert source["VisibilityTimeout"] <= 60


def test_only_the_local_stage_skips_the_bootstrap_version_check(local, dev, prod):
    assert "BootstrapVersion" not in local.template.get("Parameters", {})
    assert "Rules" not in local.template
    for synth in (dev, prod):
        assert "BootstrapVersion" in synth.template["Parameters"]


def test_context_values_from_the_cli_arrive_as_strings_and_are_converted():
    settings = settings_for("dev", {"max_receive_count": "7", "alarm_email": "a@b.example"})
    assert settings.max_receive_count == 7
    assert settings.alarm_email == "a@b.example"
    assert settings.visibility_timeout_s == 6 * settings.function_timeout_s + (
        settings.max_batching_window_s
    )


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ({"max_receive_count": "4"}, "max_receive_count"),
        ({"max_concurrency": "1"}, "max_concurrency"),
        ({"reserved_concurrency": "3", "max_concurrency": "5"}, "reserved_concurrency"),
    ],
)
def test_settings_that_break_the_design_rules_are_refused(override, message):
    with pytest.raises(ValueError, match=message):
        settings_for("dev", override)


def test_an_unknown_stage_is_refused():
    with pytest.raises(ValueError, match="unknown stage"):
        settings_for("staging")


def test_a_dlq_that_keeps_messages_less_long_than_the_source_is_refused():
    with pytest.raises(ValueError, match="DLQ"):
        StageSettings(
            stage="dev", function_timeout_s=30, memory_mb=512, batch_size=10,
            max_batching_window_s=1, max_concurrency=2, max_receive_count=5,
            reserved_concurrency=None, retain_data=False, log_retention_days=14,
            source_retention_s=c.DLQ_RETENTION_S,
        )  # fmt: skip
