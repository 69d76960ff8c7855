"""The event source mapping's opt-in settings (issue 22, item 6): provisioned mode
(``provisioned_pollers=(minimum, maximum)``) and the mapping's EventCount metrics
(``event_count_metrics=True``).

Both are off by default and then leave the template as it was (the snapshots hold the rest);
given, they land in the mapping and nowhere else. The rules are checked on
``ConsumerSettings`` directly, where Hypothesis can afford many examples; a synth costs
seconds, so only a few examples go through the construct.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path

import aws_cdk as cdk
import hypothesis
import pytest
from aws_cdk import assertions
from hypothesis import strategies as st

from infra.app import add_compliance_checks
from once_cdk import ConfigurationError, OnceConsumer
from once_cdk.settings import (
    INVOCATIONS_PER_POLLER,
    MAX_MAXIMUM_POLLERS,
    MAX_MINIMUM_POLLERS,
    MIN_POLLERS,
)
from tests.infra.consumer_settings import refusal, settings

MAPPING = "AWS::Lambda::EventSourceMapping"
HANDLER = "orders.handler.lambda_handler"


def within_limits(minimum: int, maximum: int) -> bool:
    """Lambda's rule for an SQS mapping, written out apart from the code under test."""
    return 2 <= minimum <= 200 and 2 <= maximum <= 2000 and minimum <= maximum


@pytest.fixture(scope="module")
def code(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("esm-code")
    (root / "orders").mkdir()
    (root / "orders" / "handler.py").write_text("lambda_handler = None\n")
    return root


def template_of(code: Path, **options) -> assertions.Template:
    """The template of a stack holding one OnceConsumer with these options."""
    stack = cdk.Stack(cdk.App(), "Mapping")
    OnceConsumer(stack, "Orders", code_dir=code, handler=HANDLER, service_name="orders",
                 **options)  # fmt: skip
    return assertions.Template.from_stack(stack)


@pytest.fixture(scope="module")
def default(code) -> assertions.Template:
    return template_of(code)


@pytest.fixture(scope="module")
def provisioned(code) -> assertions.Template:
    return template_of(code, provisioned_pollers=(3, 40))


@pytest.fixture(scope="module")
def metered(code) -> assertions.Template:
    return template_of(code, event_count_metrics=True)


# --- defaults ------------------------------------------------------------------------------
def test_by_default_the_mapping_has_neither_provisioned_pollers_nor_metrics(default):
    default.resource_count_is(MAPPING, 1)
    default.has_resource_properties(
        MAPPING,
        {
            "ProvisionedPollerConfig": assertions.Match.absent(),
            "MetricsConfig": assertions.Match.absent(),
            "ScalingConfig": assertions.Match.absent(),
            "FunctionResponseTypes": ["ReportBatchItemFailures"],
        },
    )


def test_the_bare_consumers_mappings_have_neither_either(bare):
    bare.assertions.has_resource_properties(
        MAPPING,
        {
            "ProvisionedPollerConfig": assertions.Match.absent(),
            "MetricsConfig": assertions.Match.absent(),
        },
    )


def test_the_defaults_are_off_in_the_settings():
    derived = settings()
    assert derived.provisioned_pollers is None
    assert derived.event_count_metrics is False


# --- given ---------------------------------------------------------------------------------
def test_provisioned_pollers_land_in_the_mapping_without_a_scaling_config(provisioned):
    provisioned.has_resource_properties(
        MAPPING,
        {
            "ProvisionedPollerConfig": {"MinimumPollers": 3, "MaximumPollers": 40},
            "ScalingConfig": assertions.Match.absent(),
            "MetricsConfig": assertions.Match.absent(),
        },
    )


def test_event_count_metrics_land_in_the_mapping(metered):
    metered.has_resource_properties(
        MAPPING,
        {
            "MetricsConfig": {"Metrics": ["EventCount"]},
            "ProvisionedPollerConfig": assertions.Match.absent(),
        },
    )


def test_the_options_change_the_mapping_and_nothing_else(default, provisioned, metered):
    """Everything outside the mapping's two properties is the default template, byte for
    byte (asset hashes included: the code is the same)."""

    def without_options(template: assertions.Template) -> dict:
        resources = copy.deepcopy(template.to_json())
        for resource in resources["Resources"].values():
            if resource["Type"] == MAPPING:
                resource["Properties"].pop("ProvisionedPollerConfig", None)
                resource["Properties"].pop("MetricsConfig", None)
        return resources

    expected = default.to_json()
    assert without_options(provisioned) == expected
    assert without_options(metered) == expected


@pytest.mark.parametrize(
    "pollers", [(MIN_POLLERS, MIN_POLLERS), (MIN_POLLERS, MAX_MAXIMUM_POLLERS),
                (MAX_MINIMUM_POLLERS, MAX_MAXIMUM_POLLERS)],
)  # fmt: skip
def test_the_bounds_themselves_are_accepted(code, pollers):
    template_of(code, provisioned_pollers=pollers).has_resource_properties(
        MAPPING,
        {"ProvisionedPollerConfig": {"MinimumPollers": pollers[0], "MaximumPollers": pollers[1]}},
    )


def test_both_on_a_fifo_queue_with_a_reservation_pass_cdk_nag_and_cfn_lint(
    code, tmp_path, cfn_lint
):
    app = cdk.App(outdir=str(tmp_path))
    stack = cdk.Stack(app, "Provisioned")
    OnceConsumer(stack, "Orders", code_dir=code, handler=HANDLER, service_name="orders",
                 fifo=True, provisioned_pollers=(2, 10), event_count_metrics=True,
                 reserved_concurrency=10 * INVOCATIONS_PER_POLLER)  # fmt: skip
    add_compliance_checks(app)
    assembly = app.synth()  # raises on any unacknowledged cdk-nag finding
    template = assertions.Template.from_json(assembly.get_stack_by_name("Provisioned").template)
    template.has_resource_properties(
        MAPPING,
        {
            "ProvisionedPollerConfig": {"MinimumPollers": 2, "MaximumPollers": 10},
            "MetricsConfig": {"Metrics": ["EventCount"]},
        },
    )
    template.has_resource_properties("AWS::Lambda::Function", {"ReservedConcurrentExecutions": 100})
    report = json.loads((tmp_path / "validation-report.json").read_text())
    for plugin in report["pluginReports"]:
        assert plugin["violations"] == [], plugin["violations"]
    cfn_lint([tmp_path / "Provisioned.template.json"])


# --- refused, through the construct --------------------------------------------------------
@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"provisioned_pollers": (2, 10), "max_concurrency": 5},
         "provisioned_pollers=(2, 10) with max_concurrency=5: Lambda refuses"),
        ({"provisioned_pollers": (1, 10)}, "a minimum of 2 to 200 event pollers, not 1"),
        ({"provisioned_pollers": (201, 300)}, "a minimum of 2 to 200 event pollers, not 201"),
        ({"provisioned_pollers": (2, 2001)}, "a maximum of 2 to 2000 event pollers, not 2001"),
        ({"provisioned_pollers": (20, 10)}, "the minimum 20 is above the maximum 10"),
        ({"provisioned_pollers": (2, 10), "reserved_concurrency": 50},
         "reserved_concurrency=50 is below what 10 pollers run at once (10 x 10 = 100)"),
        ({"event_count_metrics": "yes"}, "event_count_metrics='yes': pass True"),
    ],
)  # fmt: skip
def test_the_construct_refuses_them_before_joining_the_tree(code, options, message):
    stack = cdk.Stack(cdk.App(), "Refused")
    with pytest.raises(ConfigurationError) as refused:
        OnceConsumer(stack, "Orders", code_dir=code, handler=HANDLER, service_name="orders",
                     **options)  # fmt: skip
    assert message in str(refused.value)
    assert stack.node.children == []  # no half-built consumer left behind


# --- the rules, on the settings ------------------------------------------------------------
_EDGES = [-1, 0, 1, 2, 3, 199, 200, 201, 1999, 2000, 2001]
#: Pairs anywhere, pairs at the limits, and pairs beside the diagonal (minimum ~ maximum).
_pairs = st.one_of(
    st.tuples(st.integers(-5, 210), st.integers(-5, 2010)),
    st.tuples(st.sampled_from(_EDGES), st.sampled_from(_EDGES)),
    st.integers(-2, 205).flatmap(lambda m: st.tuples(st.just(m), st.integers(m - 2, m + 2))),
)


@hypothesis.settings(max_examples=400, deadline=None, derandomize=True)
@hypothesis.given(pair=_pairs)
def test_a_pair_is_accepted_iff_within_lambdas_limits_and_ordered(pair):
    minimum, maximum = pair
    if within_limits(minimum, maximum):
        assert settings(provisioned_pollers=(minimum, maximum)).provisioned_pollers == (
            minimum,
            maximum,
        )
    else:
        message = refusal(provisioned_pollers=(minimum, maximum))
        assert f"provisioned_pollers=({minimum}, {maximum})" in message


@hypothesis.settings(max_examples=100, deadline=None, derandomize=True)
@hypothesis.given(
    minimum=st.integers(MIN_POLLERS, MAX_MINIMUM_POLLERS),
    extra=st.integers(0, MAX_MAXIMUM_POLLERS - MAX_MINIMUM_POLLERS),
    max_concurrency=st.integers(2, 1000),
)
def test_a_valid_pair_is_always_refused_beside_max_concurrency(minimum, extra, max_concurrency):
    pollers = (minimum, minimum + extra)
    message = refusal(provisioned_pollers=pollers, max_concurrency=max_concurrency)
    assert f"with max_concurrency={max_concurrency}: Lambda refuses" in message
    assert "leave max_concurrency unset" in message


@hypothesis.settings(max_examples=200, deadline=None, derandomize=True)
@hypothesis.given(maximum=st.integers(MIN_POLLERS, 300), data=st.data())
def test_a_reservation_is_accepted_iff_it_covers_the_pollers_at_their_maximum(maximum, data):
    """Without max_concurrency the pollers bound the mapping: 10 invocations per poller at
    the maximum. A refusal's suggestions (reserve more, or fewer pollers) both pass."""
    minimum = data.draw(st.integers(MIN_POLLERS, min(maximum, MAX_MINIMUM_POLLERS)))
    pollers = (minimum, maximum)
    needed = INVOCATIONS_PER_POLLER * maximum
    reserved = data.draw(st.one_of(st.integers(1, 3000), st.integers(needed - 2, needed + 2)))
    if reserved >= needed:
        settings(provisioned_pollers=pollers, reserved_concurrency=reserved)
        return
    message = refusal(provisioned_pollers=pollers, reserved_concurrency=reserved)
    assert f"reserve at least {needed}" in message
    settings(provisioned_pollers=pollers, reserved_concurrency=needed)
    fewer = reserved // INVOCATIONS_PER_POLLER
    if f"lower the maximum of pollers to {fewer}" in message:
        settings(provisioned_pollers=(minimum, fewer), reserved_concurrency=reserved)
    else:  # no smaller maximum would do: it would fall below the minimum or below 2
        assert fewer < max(MIN_POLLERS, minimum)


@pytest.mark.parametrize(
    ("pollers", "reserved", "accepted"),
    [((10, 10), None, True), ((11, 10), None, False), ((2, 10), 100, True),
     ((2, 10), 99, False), ((2, 2000), 20_000, True), ((2, 2000), 19_999, False)],
)  # fmt: skip
def test_the_edges_of_the_rules(pollers, reserved, accepted):
    if accepted:
        settings(provisioned_pollers=pollers, reserved_concurrency=reserved)
    else:
        refusal(provisioned_pollers=pollers, reserved_concurrency=reserved)


def test_provisioned_mode_takes_a_reservation_without_max_concurrency():
    # Without pollers a reservation needs max_concurrency; with them, the pollers bound it.
    assert "without max_concurrency" in refusal(reserved_concurrency=100)
    accepted = settings(provisioned_pollers=(2, 10), reserved_concurrency=100)
    assert (accepted.provisioned_pollers, accepted.max_concurrency) == ((2, 10), None)


@pytest.mark.parametrize(
    "pollers", [(2,), (2, 10, 20), [2, 10], (2.0, 10), (True, 10), "2,10", 10, (2, None)]
)
def test_anything_but_a_pair_of_whole_numbers_is_refused_saying_what_to_pass(pollers):
    message = refusal(provisioned_pollers=pollers)
    assert f"provisioned_pollers={pollers!r}: pass (minimum, maximum)" in message


@pytest.mark.parametrize("value", ["yes", 1, None])
def test_event_count_metrics_takes_a_bool(value):
    assert f"event_count_metrics={value!r}: pass True" in refusal(event_count_metrics=value)
    assert settings(event_count_metrics=True).event_count_metrics is True


def test_every_broken_poller_rule_is_listed_at_once():
    message = refusal(provisioned_pollers=(300, 100), max_concurrency=5)
    # the minimum's range, the order, max_concurrency; the maximum (100) is within range
    assert message.count("\n- ") == 3, message
