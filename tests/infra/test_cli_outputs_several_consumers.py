"""``add_cli_outputs`` for each consumer of a stack: one consumer keeps the plain keys,
several are each named by their construct id, and the ``once`` command's reader
(``oncecli.consumers``) finds every consumer of the stack, by that name, with its own
values, from what CloudFormation's ``DescribeStacks`` would list."""

from __future__ import annotations

import json
from typing import Any

import aws_cdk as cdk
import pytest
from aws_cdk import assertions

from once import constants as c
from once_cdk import ConfigurationError, OnceConsumer, add_cli_outputs
from oncecli.consumers import choose, consumers_in
from oncecli.errors import UsageError


def _app(tmp_path: Any, *names: str) -> tuple[cdk.Stack, list[OnceConsumer]]:
    (tmp_path / "refunds").mkdir(exist_ok=True)
    (tmp_path / "refunds" / "handler.py").write_text("lambda_handler = None\n")
    app = cdk.App(outdir=str(tmp_path / "cdk.out"))
    stack = cdk.Stack(
        app, "Refunds", env=cdk.Environment(account="123456789012", region="us-east-1")
    )
    consumers = [
        OnceConsumer(
            stack,
            name,
            code_dir=tmp_path,
            handler="refunds.handler.lambda_handler",
            service_name=name.lower(),
        )
        for name in names
    ]
    for consumer in consumers:
        add_cli_outputs(consumer)
    return stack, consumers


def _described(stack: cdk.Stack) -> list[dict[str, str]]:
    """The stack's outputs as DescribeStacks lists them (each value: its template value,
    written out, standing in for what CloudFormation resolves)."""
    outputs = assertions.Template.from_stack(stack).to_json()["Outputs"]
    return [
        {
            "OutputKey": key,
            "OutputValue": json.dumps(output["Value"], sort_keys=True),
            "Description": output.get("Description", ""),
        }
        for key, output in outputs.items()
    ]


def test_one_consumer_keeps_the_plain_keys_and_is_named_by_their_descriptions(tmp_path):
    stack, _ = _app(tmp_path, "Refunds")
    described = _described(stack)
    assert {o["OutputKey"] for o in described} == set(c.OUTPUT_KEYS)
    assert all(o["Description"].startswith("once consumer Refunds: ") for o in described)
    found = consumers_in(described)
    assert list(found) == ["Refunds"]
    assert choose("Refunds", found, None)[0] == "Refunds"
    assert choose("Refunds", found, "Refunds")[0] == "Refunds"


def test_three_consumers_are_each_found_by_name_with_their_own_values(tmp_path):
    stack, consumers = _app(tmp_path, "Refunds", "SnsRefunds", "Notices")
    described = _described(stack)
    keys = {o["OutputKey"] for o in described}
    assert keys == {
        f"{name}{key}" for name in ("Refunds", "SnsRefunds", "Notices") for key in c.OUTPUT_KEYS
    }
    found = consumers_in(described)
    assert set(found) == {"Refunds", "SnsRefunds", "Notices"}
    for consumer in consumers:
        own = found[consumer.node.id]
        assert set(own) == set(c.OUTPUT_KEYS)
        assert own["ServiceName"] == json.dumps(consumer.node.id.lower())
        queue_id = stack.get_logical_id(consumer.queue.node.default_child)
        assert queue_id in own["QueueUrl"]
    assert len({json.dumps(v, sort_keys=True) for v in found.values()}) == 3


def test_the_command_asks_which_consumer_and_lists_them(tmp_path):
    stack, _ = _app(tmp_path, "Refunds", "Notices")
    found = consumers_in(_described(stack))
    with pytest.raises(UsageError, match="which consumer\\? stack Refunds has Notices, Refunds"):
        choose("Refunds", found, None)
    with pytest.raises(UsageError, match="no consumer 'Orders'; its consumers: Notices, Refunds"):
        choose("Refunds", found, "Orders")
    assert choose("Refunds", found, "Notices")[1] == found["Notices"]


def test_two_names_that_differ_only_in_punctuation_are_refused(tmp_path):
    with pytest.raises(ConfigurationError, match="give the two consumers construct ids"):
        _app(tmp_path, "Re-funds", "Refunds")


def test_outputs_without_descriptions_read_as_one_unnamed_consumer():
    """A stack deployed before outputs named their consumer still works with the command."""
    described = [{"OutputKey": k, "OutputValue": f"v-{k}"} for k in c.OUTPUT_KEYS]
    found = consumers_in(described)
    assert list(found) == [""]
    assert choose("Old", found, None) == ("", {k: f"v-{k}" for k in c.OUTPUT_KEYS})
