"""What OnceConsumer derives, row by row, and the settings it refuses at synth, with why."""

from __future__ import annotations

import re

import aws_cdk as cdk
import hypothesis
import pytest
from aws_cdk import Duration
from aws_cdk import aws_logs as logs
from hypothesis import strategies as st

from once import constants as c
from once.backoff import Backoff
from once_cdk import ConfigurationError, OnceConsumer
from once_cdk.settings import (
    DEFAULT_BACKOFF,
    backoff_s,
    derived_max_receive_count,
    longest_passing_timeout_s,
    passing_receive_counts,
    retry_window_s,
)
from tests.infra.consumer_settings import refusal, settings

RETENTION_S = c.DEFAULT_SOURCE_RETENTION_S


def suggested_counts(message: str) -> list[range]:
    """Every range of counts a refusal suggests ("max_receive_count from A to B")."""
    found = re.findall(r"max_receive_count from (\d+) to (\d+)", message)
    return [range(int(low), int(high) + 1) for low, high in found]


def suggested_timeouts(message: str) -> list[int]:
    return [int(t) for t in re.findall(r"shorten the timeout to at most (\d+) s", message)]


@pytest.mark.parametrize(
    ("receive_count", "backoff"),
    [(1, 2), (2, 4), (3, 8), (8, 256), (9, 300), (20, 300)],
)
def test_backoff_doubles_from_two_seconds_up_to_five_minutes(receive_count, backoff):
    assert backoff_s(receive_count, DEFAULT_BACKOFF, 180) == backoff
    assert Backoff(c.DEFAULT_BACKOFF_BASE_S, c.DEFAULT_BACKOFF_MAX_S) == DEFAULT_BACKOFF
    assert (c.DEFAULT_BACKOFF_BASE_S, c.DEFAULT_BACKOFF_MAX_S) == (2, 300)


def test_the_backoff_is_the_runtimes_and_none_waits_the_visibility_timeout():
    assert [backoff_s(n, Backoff(3, 50), 180) for n in (1, 2, 3, 4, 5)] == [3, 6, 12, 24, 48]
    assert backoff_s(10**6, DEFAULT_BACKOFF, 180) == 300  # no integer of a million bits
    assert [backoff_s(n, None, 180) for n in (1, 2, 9)] == [180, 180, 180]
    with pytest.raises(ValueError, match="backoff_base_s"):
        Backoff(0, 300)


@pytest.mark.parametrize(
    ("receives", "backoff", "window"),
    [
        (1, DEFAULT_BACKOFF, 2),
        (5, DEFAULT_BACKOFF, 62),
        (8, DEFAULT_BACKOFF, 510),
        (9, DEFAULT_BACKOFF, 810),
        (10, DEFAULT_BACKOFF, 1110),
        (5, Backoff(2, 60), 62),
        (19, Backoff(2, 60), 902),  # 62 s, then 60 s each
        (8, Backoff(5, 600), 1235),  # 5 + 10 + ... + 320 + 600
        (5, None, 900),  # a visibility timeout (180 s) each
    ],
)
def test_retry_window_is_the_sum_of_the_backoffs(receives, backoff, window):
    assert retry_window_s(receives, backoff, 180) == window


@pytest.mark.parametrize(
    ("visibility_timeout_s", "backoff", "receives"),
    [
        (12, DEFAULT_BACKOFF, 5),  # 60 s: 62 s after 5 receives, the minimum
        (30, DEFAULT_BACKOFF, 7),  # 150 s: 126 s after 6, 254 s after 7
        (180, DEFAULT_BACKOFF, 10),  # 900 s: 810 s after 9, 1110 s after 10
        (182, DEFAULT_BACKOFF, 10),  # 910 s
        (600, DEFAULT_BACKOFF, 17),  # 3000 s: 2910 s after 16, 3210 s after 17
        (5400, DEFAULT_BACKOFF, 97),  # 27000 s: 300 s per receive after the 9th
        (180, Backoff(2, 60), 19),  # 842 s after 18, 902 s after 19
        (180, Backoff(5, 600), 8),  # 635 s after 7, 1235 s after 8
        (180, Backoff(300, 300), 5),  # 1500 s after 5: never fewer than 5
        (6, Backoff(1, 1), 30),  # one second a receive
        (5700, Backoff(1, 1), 28_500),  # a division, not 28,500 steps
        (180, None, 5),  # every receive waits a visibility timeout
        (5700, None, 5),
    ],
)
def test_derived_max_receive_count_is_the_fewest_receives_covering_five_timeouts(
    visibility_timeout_s, backoff, receives
):
    derived = derived_max_receive_count(visibility_timeout_s, backoff)
    needed = 5 * visibility_timeout_s
    assert derived == receives
    assert retry_window_s(derived, backoff, visibility_timeout_s) >= needed
    assert derived == 5 or retry_window_s(derived - 1, backoff, visibility_timeout_s) < needed


@pytest.mark.parametrize(
    ("visibility_timeout_s", "backoff", "passing"),
    [
        (180, DEFAULT_BACKOFF, range(10, 1001)),  # SQS's 1000 is the lower of the two caps
        (5400, DEFAULT_BACKOFF, range(97, 64)),  # 63 x 5400 s < 4 days: none passes
        (5400, None, range(5, 64)),
        (5400, Backoff(2, 900), range(38, 64)),
        (4362, DEFAULT_BACKOFF, range(79, 80)),  # the 727 s timeout: one count passes
    ],
)
def test_the_counts_that_pass_run_from_the_derived_one_to_the_retention(
    visibility_timeout_s, backoff, passing
):
    assert passing_receive_counts(visibility_timeout_s, backoff, RETENTION_S) == passing


@pytest.mark.parametrize(
    ("batching_window_s", "backoff", "longest"),
    [
        (0, DEFAULT_BACKOFF, 727),
        (300, DEFAULT_BACKOFF, 677),
        (0, None, 900),
        (0, Backoff(2, 900), 900),
        (300, Backoff(1, 1), None),  # even 1 s: 306 s visibility needs 1530 receives
    ],
)
def test_the_longest_timeout_with_a_passing_count(batching_window_s, backoff, longest):
    assert longest_passing_timeout_s(batching_window_s, backoff, RETENTION_S) == longest


@pytest.mark.parametrize(
    ("timeout_s", "window_s", "visibility", "receives"),
    [(30, 0, 180, 10), (30, 1, 181, 10), (30, 2, 182, 10), (2, 0, 12, 5), (60, 5, 365, 13)],
)
def test_settings_derive_visibility_timeout_and_receives(timeout_s, window_s, visibility, receives):
    derived = settings(timeout_s=timeout_s, batching_window_s=window_s, batch_size=10)
    assert derived.visibility_timeout_s == visibility == 6 * timeout_s + window_s
    assert derived.receive_count == receives
    assert retry_window_s(derived.receive_count, DEFAULT_BACKOFF, visibility) >= 5 * visibility
    assert derived.oldest_message_alarm_s == receives * visibility


def test_a_given_max_receive_count_is_kept_as_given():
    assert settings(max_receive_count=12).receive_count == 12


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
        ({"timeout_s": 900}, "the derived maxReceiveCount 97: 97 x visibility timeout 5400 s",
         "expire before reaching the DLQ"),
        ({"timeout_s": 900, "max_receive_count": 64, "backoff": None}, "max_receive_count=64",
         "max_receive_count from 5 to 63"),
        ({"max_receive_count": 1001}, "max_receive_count=1001", "SQS takes at most 1000"),
        ({"max_receive_count": 5}, "max_receive_count=5", "retries end after 62 s, before 5 "
         "visibility timeouts (900 s)"),
        ({"backoff": (5, 600)}, "backoff=(5, 600)", "expected once.backoff.Backoff"),
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
    assert settings(timeout_s=900, max_receive_count=63, backoff=None).receive_count == 63


# --- maxReceiveCount under the handler's backoff (issue 21, defect 6) ------------------------
def test_an_explicit_five_is_refused_when_its_retries_end_before_five_visibility_timeouts():
    message = refusal(max_receive_count=5)  # 30 s timeout: 62 s of retries, 900 s needed
    assert "retries end after 62 s, before 5 visibility timeouts (900 s)" in message
    assert "backoff=Backoff(backoff_base_s, backoff_max_s)" in message  # the opt-out
    assert "backoff=None" in message
    [suggested] = suggested_counts(message)
    assert suggested == range(10, 1001)
    for count in suggested:
        assert settings(max_receive_count=count).receive_count == count
    for count in (4, 5, 9, 1001):
        with pytest.raises(ConfigurationError):
            settings(max_receive_count=count)


@pytest.mark.parametrize(
    ("backoff", "passing"),
    # The counts that pass run from the derived one to 63 (63 x 5400 s < 4 days); under the
    # default backoff the derived one is 97: none passes.
    [(None, range(5, 64)), (Backoff(2, 900), range(38, 64)), (DEFAULT_BACKOFF, range(97, 64))],
)
def test_for_a_900_s_timeout_no_suggested_value_breaks_a_rule(backoff, passing):
    messages = [
        refusal(timeout_s=900, max_receive_count=count, backoff=backoff)
        for count in (4, 5, passing.start - 1, 63, 64, 1000)
        if count not in passing
    ]
    for message in messages:
        assert suggested_counts(message) == ([passing] if passing else [])
    for count in passing:
        accepted = settings(timeout_s=900, max_receive_count=count, backoff=backoff)
        assert accepted.receive_count == count
    for outside in (passing.start - 1, 64):  # just below the derived count, just above 63
        with pytest.raises(ConfigurationError):
            settings(timeout_s=900, max_receive_count=outside, backoff=backoff)
    if not passing:  # none passes: the message says so, and which timeout does
        assert all("no maxReceiveCount passes" in m for m in messages)
        [longest] = set(suggested_timeouts(refusal(timeout_s=900, backoff=backoff)))
        assert longest == 727
        assert settings(timeout_s=longest, backoff=backoff).receive_count == 79
        with pytest.raises(ConfigurationError):
            settings(timeout_s=longest + 1, backoff=backoff)


def test_without_backoff_five_receives_are_five_visibility_timeouts():
    assert settings(max_receive_count=5, backoff=None).receive_count == 5
    assert settings(backoff=None).receive_count == 5
    assert settings(timeout_s=900, backoff=None).receive_count == 5
    with pytest.raises(ConfigurationError, match="max_receive_count=4: fewer than 5"):
        settings(max_receive_count=4, backoff=None)


def test_a_declared_backoff_derives_and_checks_with_its_own_formula():
    # 5, 10, ..., 320, 600 s: 635 s after 7 receives, 1235 s after 8 >= 900 s.
    assert settings(backoff=Backoff(5, 600)).receive_count == 8
    assert settings(max_receive_count=8, backoff=Backoff(5, 600)).receive_count == 8
    message = refusal(max_receive_count=7, backoff=Backoff(5, 600))
    assert "under the declared backoff (5 s doubling up to 600 s)" in message
    assert "retries end after 635 s" in message
    assert suggested_counts(message) == [range(8, 1001)]
    assert "backoff=Backoff(backoff_base_s" not in message  # it declared one already
    # The README's example: a 60 s maximum needs 19 receives where the default derives 10.
    assert settings(backoff=Backoff(2, 60)).receive_count == 19
    assert suggested_counts(refusal(max_receive_count=10, backoff=Backoff(2, 60))) == [
        range(19, 1001)
    ]


# The rules, written out again, apart from once_cdk.settings: a walk over the receives.
def _windows_s(backoff: Backoff | None, visibility: int, receives: int) -> list[int]:
    """The retry window after 0, 1, ... ``receives`` receives."""
    windows = [0]
    for n in range(1, receives + 1):
        delay = (
            visibility
            if backoff is None
            else min(backoff.max_s, backoff.base_s * 2 ** min(n - 1, 32))
        )
        windows.append(windows[-1] + delay)
    return windows


_backoffs = st.one_of(
    st.none(),
    st.just(DEFAULT_BACKOFF),
    st.integers(1, 600).flatmap(
        lambda base: st.builds(Backoff, st.just(base), st.integers(base, 43_200))
    ),
)


@hypothesis.settings(max_examples=300, deadline=None, derandomize=True)
@hypothesis.given(
    timeout_s=st.integers(1, 900),
    batching_window_s=st.one_of(st.just(0), st.integers(0, 300)),
    backoff=_backoffs,
    data=st.data(),
)
def test_a_count_is_accepted_iff_it_keeps_every_rule_and_suggestions_all_pass(
    timeout_s, batching_window_s, backoff, data
):
    visibility = 6 * timeout_s + batching_window_s
    needed = 5 * visibility
    derived = 5
    while _windows_s(backoff, visibility, derived)[-1] < needed:
        derived = derived * 2  # a bound to walk back from
    windows = _windows_s(backoff, visibility, max(derived, 1102))
    derived = next(n for n in range(5, len(windows)) if windows[n] >= needed)
    fits = (RETENTION_S - 1) // visibility

    def keeps_every_rule(count: int) -> bool:
        return 5 <= count <= 1000 and windows[count] >= needed and count * visibility < RETENTION_S

    count = data.draw(
        st.one_of(
            st.none(),
            st.integers(1, 1100),
            st.integers(-2, 2).map(lambda d: derived + d),
            st.integers(-2, 2).map(lambda d: min(fits, 1000) + d),
        ),
        label="max_receive_count",
    )
    arguments = {"timeout_s": timeout_s, "batching_window_s": batching_window_s,
                 "batch_size": 10, "backoff": backoff}  # fmt: skip
    try:
        accepted = settings(max_receive_count=count, **arguments)
    except ConfigurationError as refused:
        message = str(refused)
        assert not keeps_every_rule(derived if count is None else count), message
        for suggested in suggested_counts(message):
            for value in suggested:
                assert keeps_every_rule(value), message
                assert settings(max_receive_count=value, **arguments).receive_count == value
        if not suggested_counts(message):
            assert not any(keeps_every_rule(n) for n in range(5, 1001)), message
            assert "no maxReceiveCount passes" in message
        for longest in suggested_timeouts(message):
            assert settings(**{**arguments, "timeout_s": longest}).receive_count
            if longest < 900:
                with pytest.raises(ConfigurationError):
                    settings(**{**arguments, "timeout_s": longest + 1})
    else:
        assert keeps_every_rule(accepted.receive_count)
        assert accepted.receive_count == (derived if count is None else count)


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


@pytest.mark.parametrize(
    ("overrides", "receives"),
    [
        ({}, 10),
        ({"backoff": Backoff(5, 600)}, 8),
        ({"backoff": None}, 5),
        ({"backoff": None, "max_receive_count": 5}, 5),
        ({"backoff": Backoff(2, 60), "max_receive_count": 19}, 19),
    ],
)
def test_the_construct_derives_and_checks_max_receive_count_with_the_declared_backoff(
    stack, tmp_path, overrides, receives
):
    built = consumer(stack, tmp_path, **overrides)
    redrive = stack.resolve(built.queue.node.default_child.redrive_policy)
    assert redrive["maxReceiveCount"] == built.settings.receive_count == receives
    assert built.settings.backoff == overrides.get("backoff", DEFAULT_BACKOFF)


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"max_receive_count": 5}, "retries end after 62 s, before 5 visibility timeouts"),
        ({"max_receive_count": 18, "backoff": Backoff(2, 60)}, "from 19 to 1000"),
    ],
)
def test_the_construct_refuses_a_count_too_short_for_the_declared_backoff(
    stack, tmp_path, overrides, message
):
    with pytest.raises(ConfigurationError) as refused:
        consumer(stack, tmp_path, **overrides)
    assert message in str(refused.value)


def test_a_refused_consumer_leaves_nothing_in_the_stack(stack, tmp_path):
    with pytest.raises(ConfigurationError):
        consumer(stack, tmp_path, max_receive_count=2)
    assert stack.node.try_find_child("Orders") is None
    consumer(stack, tmp_path)  # the id is free for a corrected retry
