"""``OnceConsumer(filters=)``: the mapping's ``FilterCriteria``, in Lambda's syntax.

Given, each pattern lands in the mapping as its compact JSON text (the text ``once_env`` and
the local cloud match) and nowhere else; left out, the template is what it was (the
snapshots hold the rest). What Lambda would refuse is refused at synth, before the
construct joins the tree, naming the filter and the fix; more filters than Lambda's default
quota is a warning to acknowledge once the quota was raised. The rules, each with its page:
``once.event_filters`` and ``tests/unit/runtime/test_event_filters_as_lambda.py``.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import aws_cdk as cdk
import pytest
from aws_cdk import assertions
from aws_cdk import aws_lambda as lambda_

from infra.app import add_compliance_checks
from once_cdk import ConfigurationError, OnceConsumer
from once_cdk.consumer import FILTERS_ABOVE_DEFAULT_QUOTA

MAPPING = "AWS::Lambda::EventSourceMapping"
HANDLER = "orders.handler.lambda_handler"
ORDERS = {"body": {"type": ["order"], "amount": [{"numeric": [">", 0]}]}}
LEGACY = {"body": [{"prefix": "ORDER:"}]}


@pytest.fixture(scope="module")
def code(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("filter-code")
    (root / "orders").mkdir()
    (root / "orders" / "handler.py").write_text("lambda_handler = None\n")
    return root


def _stack(code: Path, **options: Any) -> tuple[cdk.Stack, OnceConsumer]:
    stack = cdk.Stack(cdk.App(), "Filters")
    consumer = OnceConsumer(stack, "Orders", code_dir=code, handler=HANDLER,
                            service_name="orders", **options)  # fmt: skip
    return stack, consumer


def template_of(code: Path, **options: Any) -> assertions.Template:
    return assertions.Template.from_stack(_stack(code, **options)[0])


@pytest.fixture(scope="module")
def default(code) -> assertions.Template:
    return template_of(code)


@pytest.fixture(scope="module")
def filtered(code) -> assertions.Template:
    return template_of(code, filters=[ORDERS, LEGACY])


def test_the_patterns_land_in_the_mappings_filter_criteria(filtered):
    filtered.has_resource_properties(
        MAPPING,
        {
            "FilterCriteria": {
                "Filters": [
                    {"Pattern": '{"body":{"type":["order"],"amount":[{"numeric":[">",0]}]}}'},
                    {"Pattern": '{"body":[{"prefix":"ORDER:"}]}'},
                ]
            }
        },
    )


def test_the_text_is_what_cdks_filter_criteria_writes_for_a_plain_pattern():
    """CDK's ``FilterCriteria.filter`` is ``{"pattern": JSON.stringify(filter)}``: for
    patterns without a float, the construct's text is the same."""
    written = lambda_.FilterCriteria.filter(ORDERS)["pattern"]
    assert json.loads(written) == ORDERS
    assert written == '{"body":{"type":["order"],"amount":[{"numeric":[">",0]}]}}'


def test_without_filters_the_mapping_has_no_filter_criteria(default, bare):
    default.has_resource_properties(MAPPING, {"FilterCriteria": assertions.Match.absent()})
    bare.assertions.has_resource_properties(MAPPING, {"FilterCriteria": assertions.Match.absent()})


def test_filters_change_the_mapping_and_nothing_else(default, filtered):
    resources = copy.deepcopy(filtered.to_json())
    for resource in resources["Resources"].values():
        if resource["Type"] == MAPPING:
            resource["Properties"].pop("FilterCriteria")
    assert resources == default.to_json()


def test_a_filtered_consumer_passes_cdk_nag_and_cfn_lint(code, tmp_path, cfn_lint):
    app = cdk.App(outdir=str(tmp_path))
    stack = cdk.Stack(app, "Filtered")
    OnceConsumer(stack, "Orders", code_dir=code, handler=HANDLER, service_name="orders",
                 fifo=True, filters=[ORDERS, LEGACY])  # fmt: skip
    add_compliance_checks(app)
    app.synth()  # raises on any unacknowledged cdk-nag finding
    report = json.loads((tmp_path / "validation-report.json").read_text())
    for plugin in report["pluginReports"]:
        assert plugin["violations"] == [], plugin["violations"]
    cfn_lint([tmp_path / "Filtered.template.json"])


# --- Lambda's quota --------------------------------------------------------------------------


def _warnings(stack: cdk.Stack) -> list[str]:
    found = assertions.Annotations.from_stack(stack).find_warning("*", assertions.Match.any_value())
    return [str(m.entry.data) for m in found]


def _patterns(count: int) -> list[dict[str, Any]]:
    return [{"body": {"n": [n]}} for n in range(count)]


def test_up_to_the_default_quota_no_warning(code):
    stack, _ = _stack(code, filters=_patterns(5))
    assert not [w for w in _warnings(stack) if FILTERS_ABOVE_DEFAULT_QUOTA in w]


def test_above_the_default_quota_a_warning_to_acknowledge_once_raised(code):
    stack, consumer = _stack(code, filters=_patterns(6))
    (warning,) = [w for w in _warnings(stack) if FILTERS_ABOVE_DEFAULT_QUOTA in w]
    assert "has 6 filters, above Lambda's default quota of 5" in warning
    assert f"acknowledge_warning('{FILTERS_ABOVE_DEFAULT_QUOTA}')" in warning
    acknowledged, consumer = _stack(code, filters=_patterns(10))
    cdk.Annotations.of(consumer).acknowledge_warning(FILTERS_ABOVE_DEFAULT_QUOTA)
    assert not [w for w in _warnings(acknowledged) if FILTERS_ABOVE_DEFAULT_QUOTA in w]


# --- refused, through the construct -----------------------------------------------------------


@pytest.mark.parametrize(
    ("filters", "message"),
    [
        (_patterns(11), "11 filters: an event source mapping takes at most 10"),
        ([], "filters=[]: pass at least one pattern"),
        ({"body": {"type": ["order"]}}, "pass a list of patterns"),
        ([lambda_.FilterCriteria.filter({"body": {"type": ["order"]}})],
         "pass the pattern itself"),
        (['{"body": {"type": ["order"]}}'], "a pattern is a JSON object"),
        ([{"messageAttributes": {"type": {"stringValue": ["order"]}}}],
         "names 'messageAttributes': an SQS event source mapping filters on the message's "
         "'body' only"),
        ([{"body": {"path": [{"wildcard": "*/lib/*"}]}}],
         "uses 'wildcard', which Lambda's event filtering does not offer"),
        ([{"body": {"a": ["x" * 4096]}}], "characters of JSON: Lambda takes a pattern of at most"),
        ([{"body": {"a": []}}], "Empty arrays are not allowed"),
        ([ORDERS, dict(ORDERS)], "filters[1] repeats filters[0]"),
    ],
)  # fmt: skip
def test_the_construct_refuses_what_lambda_refuses_before_joining_the_tree(code, filters, message):
    stack = cdk.Stack(cdk.App(), "Refused")
    with pytest.raises(ConfigurationError) as refused:
        OnceConsumer(stack, "Orders", code_dir=code, handler=HANDLER, service_name="orders",
                     filters=filters)  # fmt: skip
    assert message in str(refused.value)
    assert stack.node.children == []  # no half-built consumer left behind


def test_every_refused_filter_is_listed_with_the_other_settings(code):
    stack = cdk.Stack(cdk.App(), "Refused")
    filters = [{"attributes": {"x": ["y"]}}, {"body": [{"cidr": "10.0.0.0/8"}]}]
    with pytest.raises(ConfigurationError) as refused:
        OnceConsumer(stack, "Orders", code_dir=code, handler=HANDLER, service_name="orders",
                     batch_size=11, fifo=True, filters=filters)  # fmt: skip
    message = str(refused.value)
    assert message.count("\n- ") == 3, message
    assert "filters[0] names 'attributes'" in message and "filters[1] uses 'cidr'" in message
