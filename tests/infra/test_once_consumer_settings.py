"""What OnceConsumer derives, row by row, and the settings it refuses at synth, with why."""

from __future__ import annotations

import aws_cdk as cdk
import pytest
from aws_cdk import Duration
from aws_cdk import aws_logs as logs

from once import constants as c
from once_cdk import ConfigurationError, OnceConsumer
from once_cdk.settings import ConsumerSettings, backoff_s, derived_max_receive_count, retry_window_s


def settings(**overrides) -> ConsumerSettings:
    values = {
        "service_name": "orders", "fifo": False, "timeout_s": 30, "memory_mb": 512,
        "batch_size": 10, "batching_window_s": 0, "max_concurrency": None,
        "reserved_concurrency": None, "max_receive_count": None,
    }  # fmt: skip
    return ConsumerSettings(**{**values, **overrides})


@pytest.mark.parametrize(
    ("receive_count", "backoff"),
    [(1, 2), (2, 4), (3, 8), (8, 256), (9, 300), (20, 300)],
)
def test_backoff_doubles_from_two_seconds_up_to_five_minutes(receive_count, backoff):
    assert backoff_s(receive_count) == backoff
    assert (c.DEFAULT_BACKOFF_BASE_S, c.DEFAULT_BACKOFF_MAX_S) == (2, 300)


def test_the_backoff_is_the_runtimes_and_refuses_what_the_runtime_refuses():
    assert [backoff_s(n, 3, 50) for n in (1, 2, 3, 4, 5)] == [3, 6, 12, 24, 48]
    assert backoff_s(10**6) == c.DEFAULT_BACKOFF_MAX_S  # no integer of a million bits
    with pytest.raises(ValueError, match="backoff_base_s"):
        backoff_s(1, 0, 300)


@pytest.mark.parametrize(("receives", "window"), [(1, 2), (5, 62), (8, 510), (9, 810), (10, 1110)])
def test_retry_window_is_the_sum_of_the_backoffs(receives, window):
    assert retry_window_s(receives) == window


@pytest.mark.parametrize(
    ("visibility_timeout_s", "receives"),
    [
        (12, 5),  # 60 s: 62 s after 5 receives, the minimum
        (30, 7),  # 150 s: 126 s after 6, 254 s after 7
        (180, 10),  # 900 s: 810 s after 9, 1110 s after 10
        (182, 10),  # 910 s
        (600, 17),  # 3000 s: 2910 s after 16, 3210 s after 17
        (5400, 97),  # 27000 s: 300 s per receive after the 9th
    ],
)
def test_derived_max_receive_count_is_the_fewest_receives_covering_five_timeouts(
    visibility_timeout_s, receives
):
    derived = derived_max_receive_count(visibility_timeout_s)
    needed = 5 * visibility_timeout_s
    assert derived == receives
    assert retry_window_s(derived) >= needed
    assert derived == 5 or retry_window_s(derived - 1) < needed


@pytest.mark.parametrize(
    ("timeout_s", "window_s", "visibility", "receives"),
    [(30, 0, 180, 10), (30, 1, 181, 10), (30, 2, 182, 10), (2, 0, 12, 5), (60, 5, 365, 13)],
)
def test_settings_derive_visibility_timeout_and_receives(timeout_s, window_s, visibility, receives):
    derived = settings(timeout_s=timeout_s, batching_window_s=window_s, batch_size=10)
    assert derived.visibility_timeout_s == visibility == 6 * timeout_s + window_s
    assert derived.receive_count == receives
    assert retry_window_s(derived.receive_count) >= 5 * visibility
    assert derived.oldest_message_alarm_s == receives * visibility


def test_a_given_max_receive_count_is_kept_as_given():
    assert settings(max_receive_count=7).receive_count == 7


def test_records_outlive_both_queues_by_a_day():
    derived = settings()
    assert derived.dlq_retention_s > derived.source_retention_s
    assert (
        derived.record_retention_s
        == (derived.source_retention_s + derived.dlq_retention_s + c.DAY_S)
        == c.DEFAULT_RETENTION_S
    )


@pytest.mark.parametrize(
    ("overrides", "names", "why"),
    [
        ({"fifo": True, "batch_size": 11}, "batch_size=11", "a FIFO queue takes 1 to 10"),
        ({"fifo": True, "batching_window_s": 1}, "max_batching_window=1", "FIFO"),
        ({"batch_size": 100}, "batch_size=100 without a batching window", "at least 1 s"),
        ({"batch_size": 0}, "batch_size=0", "1 to 10000"),
        ({"batching_window_s": 301}, "max_batching_window=301", "0 to 300"),
        ({"max_concurrency": 1}, "max_concurrency=1", "2 to 1000"),
        ({"max_concurrency": 10, "reserved_concurrency": 5},
         "reserved_concurrency=5 is below max_concurrency=10", "throttled"),
        ({"reserved_concurrency": 5}, "reserved_concurrency=5 without max_concurrency",
         "throttled"),
        ({"max_receive_count": 4}, "max_receive_count=4", "too few attempts"),
        ({"timeout_s": 0}, "timeout=0", "1 to 900"),
        ({"timeout_s": 1.5}, "timeout=1.5", "whole seconds"),
        ({"timeout_s": 901}, "timeout=901", "1 to 900"),
        ({"memory_mb": 64}, "memory_size=64", "128 to 10240"),
        ({"service_name": "or#ders"}, "service_name='or#ders'", "prefixes every record key"),
        ({"service_name": ""}, "service_name=''", "letters, digits"),
        ({"environment": ("DLQ_URL", "TZ")}, "environment sets DLQ_URL", "sets these itself"),
        ({"timeout_s": 900}, "the derived maxReceiveCount 97 x visibility timeout 5400 s",
         "expire before reaching the DLQ"),
        ({"timeout_s": 900, "max_receive_count": 64}, "max_receive_count 64",
         "max_receive_count from 5 to 63"),
    ],
)  # fmt: skip
def test_a_setting_that_breaks_a_rule_is_refused_saying_which_and_why(overrides, names, why):
    with pytest.raises(ConfigurationError) as refused:
        settings(**overrides)
    message = str(refused.value)
    assert names in message and why in message, message


def test_every_broken_rule_is_listed_at_once():
    with pytest.raises(ConfigurationError) as refused:
        settings(fifo=True, batch_size=20, batching_window_s=5, memory_mb=1)
    assert str(refused.value).count("\n- ") == 3


def test_a_long_timeout_fits_with_a_receive_count_within_the_retention():
    assert settings(timeout_s=900, max_receive_count=63).receive_count == 63


# --- through the construct: refused before anything is built --------------------------------
@pytest.fixture
def stack():
    return cdk.Stack(cdk.App(), "Refusals")


def consumer(stack, tmp_path, **overrides):
    (tmp_path / "orders").mkdir(exist_ok=True)
    (tmp_path / "orders" / "handler.py").write_text("lambda_handler = None\n")
    arguments = {"code_dir": tmp_path, "handler": "orders.handler.lambda_handler",
                 "service_name": "orders", **overrides}  # fmt: skip
    return OnceConsumer(stack, "Orders", **arguments)


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"fifo": True, "batch_size": 20}, "batch_size=20: a FIFO queue takes 1 to 10"),
        ({"fifo": True, "max_batching_window": Duration.seconds(5)}, "on a FIFO queue"),
        ({"reserved_concurrency": 2, "max_concurrency": 5}, "reserved_concurrency=2"),
        ({"max_receive_count": 3}, "max_receive_count=3"),
        ({"log_retention": 10}, "log_retention=10: CloudWatch Logs keeps logs for one of"),
        ({"timeout": Duration.millis(1500)}, "timeout=1.5 s"),
        ({"timeout": 30}, "timeout=30: expected an aws_cdk.Duration"),
        ({"handler": "orders.missing.lambda_handler"}, "no module 'orders.missing'"),
        ({"handler": "lambda_handler"}, "expected 'package.module.function'"),
        ({"environment": {"IDEMPOTENCY_TABLE_NAME": "x"}}, "environment sets"),
    ],
)  # fmt: skip
def test_the_construct_refuses_bad_settings_at_synth(stack, tmp_path, overrides, message):
    with pytest.raises(ConfigurationError, match=None) as refused:
        consumer(stack, tmp_path, **overrides)
    assert message in str(refused.value)


def test_the_construct_refuses_a_code_dir_that_is_missing(stack, tmp_path):
    with pytest.raises(ConfigurationError, match="is not a directory"):
        consumer(stack, tmp_path, code_dir=tmp_path / "nowhere")


def test_the_construct_refuses_a_code_dir_with_its_own_once_package(stack, tmp_path):
    (tmp_path / "once").mkdir()
    (tmp_path / "once" / "__init__.py").write_text("")
    with pytest.raises(ConfigurationError, match="holds its own 'once' package"):
        consumer(stack, tmp_path)


def test_log_retention_takes_days_cloudwatch_accepts(stack, tmp_path):
    built = consumer(stack, tmp_path, log_retention=30)
    resolved = stack.resolve(built.log_group.node.default_child.retention_in_days)
    assert resolved == 30
    assert consumer(cdk.Stack(cdk.App(), "Other"), tmp_path,
                    log_retention=logs.RetentionDays.INFINITE)  # fmt: skip


def test_a_refused_consumer_leaves_nothing_in_the_stack(stack, tmp_path):
    with pytest.raises(ConfigurationError):
        consumer(stack, tmp_path, max_receive_count=2)
    assert stack.node.try_find_child("Orders") is None
    consumer(stack, tmp_path)  # the id is free for a corrected retry
