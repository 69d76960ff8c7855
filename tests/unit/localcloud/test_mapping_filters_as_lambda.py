"""The local cloud's event source mapping applies the template's ``FilterCriteria`` as Lambda
does: a message no filter keeps is deleted as it is received, never joins a batch, never
reaches the function ("For Amazon SQS, if a message doesn't satisfy your filter criteria,
Lambda automatically removes the message from the queue",
https://docs.aws.amazon.com/lambda/latest/dg/invocation-eventfiltering.html). The criteria
are read from the synthesized template, as ``OnceConsumer(filters=)`` writes them, and
judged by the rule ``once_env`` applies (``once.event_filters``): the two agree.

No process, no clock: the mapping's receive runs against a queue that answers from a list.
"""

from __future__ import annotations

import json
from typing import Any

import aws_cdk as cdk
import pytest
from aws_cdk import assertions
from hypothesis import given, settings
from hypothesis import strategies as st

from once import make_handler
from once.testing import OnceEnv
from once_cdk import OnceConsumer
from oncecli.errors import EngineFailed
from oncecli.localcloud.mapping import FunctionConfig, Mapping, MappingConfig, filters_of

FILTERS = [{"body": {"type": ["order"]}}, {"body": [{"prefix": "ORDER:"}]}]
FUNCTION = FunctionConfig("fn", "arn:fn", "h.h", timeout_s=5, memory_mb=128, environment={})


@pytest.fixture(scope="module")
def mapping_properties(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The mapping's properties in the template of a consumer with ``FILTERS``."""
    root = tmp_path_factory.mktemp("filtered")
    (root / "orders").mkdir()
    (root / "orders" / "handler.py").write_text("lambda_handler = None\n")
    stack = cdk.Stack(cdk.App(), "Filtered")
    OnceConsumer(stack, "Orders", code_dir=root, handler="orders.handler.lambda_handler",
                 service_name="orders", filters=FILTERS)  # fmt: skip
    template = assertions.Template.from_stack(stack).to_json()
    (mapping,) = [r for r in template["Resources"].values()
                  if r["Type"] == "AWS::Lambda::EventSourceMapping"]  # fmt: skip
    return mapping["Properties"]


class ListedQueue:
    """A queue that answers each receive with the next list of bodies, then stops the
    mapping; it records what was deleted."""

    def __init__(self, mapping: Mapping, *receives: list[str]) -> None:
        self._mapping = mapping
        self._receives = list(receives)
        self.deleted: list[str] = []
        self._bodies: dict[str, str] = {}

    def receive_message(self, **request: Any) -> dict[str, Any]:
        if not self._receives:
            self._mapping._stop.set()
            return {}
        messages = []
        for body in self._receives.pop(0):
            message_id = f"m-{len(self._bodies)}"
            self._bodies[message_id] = body
            messages.append({"MessageId": message_id, "ReceiptHandle": f"rh-{message_id}",
                             "Body": body, "MD5OfBody": "", "Attributes": {}})  # fmt: skip
        return {"Messages": messages}

    def delete_message_batch(self, **request: Any) -> dict[str, Any]:
        entries = request["Entries"]
        self.deleted += [self._bodies[e["ReceiptHandle"].removeprefix("rh-")] for e in entries]
        return {"Successful": [{"Id": e["Id"]} for e in entries]}


def _mapping(filters: tuple[dict[str, Any], ...], batch_size: int = 10) -> Mapping:
    config = MappingConfig(queue_url="q", queue_arn="arn:aws:sqs:us-east-1:1:q",
                           region="us-east-1", batch_size=batch_size, filters=filters)  # fmt: skip
    return Mapping(config, FUNCTION, sqs_factory=lambda: None, workers=1, env={})


def _batch(filters: tuple[dict[str, Any], ...], *receives: list[str]) -> tuple[list[str], Any]:
    mapping = _mapping(filters)
    queue = ListedQueue(mapping, *receives)
    return [m["Body"] for m in mapping._receive(queue)], (queue, mapping)


# --- the template ------------------------------------------------------------------------------


def test_the_mapping_reads_the_templates_filter_criteria(mapping_properties) -> None:
    assert "FilterCriteria" in mapping_properties
    assert filters_of(mapping_properties, "Filtered/Mapping") == tuple(FILTERS)


def test_a_mapping_without_filter_criteria_filters_nothing() -> None:
    assert filters_of({"BatchSize": 10}, "Bare/Mapping") == ()
    kept, (queue, _) = _batch((), ['{"type": "refund"}'])
    assert kept == ['{"type": "refund"}'] and queue.deleted == []


def test_criteria_lambda_would_refuse_fail_the_deploy() -> None:
    broken = {"FilterCriteria": {"Filters": [{"Pattern": '{"messageAttributes":{"t":["x"]}}'}]}}
    with pytest.raises(EngineFailed, match="Stack/Mapping: filters refused"):
        filters_of(broken, "Stack/Mapping")


# --- the receive ---------------------------------------------------------------------------------


def test_a_message_no_filter_keeps_is_deleted_and_never_joins_the_batch(mapping_properties):
    filters = filters_of(mapping_properties, "Filtered/Mapping")
    bodies = ['{"type": "order", "orderId": "o-1"}', '{"type": "refund"}', "ORDER:o-2", "hello"]

    kept, (queue, mapping) = _batch(filters, bodies)

    assert kept == [bodies[0], bodies[2]]
    assert queue.deleted == [bodies[1], bodies[3]]
    assert mapping.snapshot()["filtered"] == 2
    assert mapping.stats.filtered_ids == {"m-1", "m-3"}


def test_a_receive_of_nothing_kept_invokes_nothing_and_polls_on() -> None:
    kept, (queue, _) = _batch(tuple(FILTERS), ['{"type": "refund"}'], ['{"type": "order"}'])
    assert kept == ['{"type": "order"}']
    assert queue.deleted == ['{"type": "refund"}']


def test_a_kept_message_without_its_key_is_handed_over_for_the_dlq() -> None:
    """Filtering comes before once: a kept body without ``orderId`` reaches the function,
    whose runtime quarantines it (INVALID_KEY), as it does without filters."""
    kept, (queue, _) = _batch(tuple(FILTERS), ['{"type": "order"}'])
    assert kept == ['{"type": "order"}'] and queue.deleted == []


# --- the local cloud and once_env agree ---------------------------------------------------------

_bodies = st.lists(
    st.one_of(
        st.sampled_from(["ORDER:1", "REFUND:1", "order", "not json {", "42", '"ORDER:x"']),
        st.fixed_dictionaries({"type": st.sampled_from(["order", "refund", "ORDER"])}).map(
            json.dumps
        ),
    ),
    min_size=1,
    max_size=6,
)


@pytest.fixture(scope="module")
def env() -> Any:
    with OnceEnv(filters=FILTERS) as environment:
        yield environment


def _quiet(body: dict[str, Any], attempt: Any) -> None:
    return None


_handler = make_handler(_quiet, key="type")


@settings(max_examples=25, deadline=None, derandomize=True)
@given(bodies=_bodies)
def test_the_mapping_and_once_env_drop_the_same_messages(env: OnceEnv, bodies: list[str]):
    kept, _ = _batch(tuple(FILTERS), bodies)
    delivery = env.deliver(_handler, bodies)
    by_kit = [b for b, i in zip(bodies, delivery.message_ids, strict=True)
              if i not in delivery.filtered_out]  # fmt: skip
    assert kept == by_kit
