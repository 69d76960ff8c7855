"""The local cloud finds every ``OnceConsumer`` of an app, and nothing else: in any template,
each SQS event source mapping whose function has once's environment is one consumer, named
by its construct path, with its asset; other functions and mappings are not consumers.
Stacks are deployed with what they depend on, in the manifest's order."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from once import constants as c
from oncecli.localcloud.template import StackFound, _consumers, stacks_of, to_deploy

mappings = st.lists(
    st.fixed_dictionaries(
        {
            "once_env": st.booleans(),  # the function has once's environment
            "source": st.sampled_from(["AWS::SQS::Queue", "AWS::Kinesis::Stream"]),
            "asset": st.booleans(),
            "alias": st.booleans(),  # the mapping invokes an alias of a version (SnapStart)
        }
    ),
    max_size=6,
)


def _template(specs: list[dict[str, Any]], stack: str) -> dict[str, Any]:
    resources: dict[str, Any] = {"Other": {"Type": "AWS::SNS::Topic"}}
    for n, spec in enumerate(specs):
        env = {c.ENV_TABLE_NAME: {"Ref": f"Table{n}"}} if spec["once_env"] else {"X": "1"}
        metadata = {"aws:cdk:path": f"{stack}/Consumer{n}/Function/Resource"}
        if spec["asset"]:
            metadata["aws:asset:path"] = f"asset.{n}"
        resources[f"Function{n}"] = {
            "Type": "AWS::Lambda::Function",
            "Properties": {"Environment": {"Variables": env}},
            "Metadata": metadata,
        }
        resources[f"Source{n}"] = {"Type": spec["source"]}
        invoked: dict[str, Any] = {"Ref": f"Function{n}"}
        if spec["alias"]:  # as aws-cdk-lib writes a mapping on Alias(version=current_version)
            resources[f"Version{n}"] = {
                "Type": "AWS::Lambda::Version",
                "Properties": {"FunctionName": {"Ref": f"Function{n}"}},
            }
            resources[f"Alias{n}"] = {
                "Type": "AWS::Lambda::Alias",
                "Properties": {
                    "FunctionName": {"Ref": f"Function{n}"},
                    "FunctionVersion": {"Fn::GetAtt": [f"Version{n}", "Version"]},
                    "Name": "live",
                },
            }
            arn = {"Fn::Split": [":", {"Ref": f"Alias{n}"}]}
            invoked = {"Fn::Join": ["", [{"Fn::Select": [6, arn]}, ":", {"Fn::Select": [7, arn]}]]}
        resources[f"Mapping{n}"] = {
            "Type": "AWS::Lambda::EventSourceMapping",
            "Properties": {
                "FunctionName": invoked,
                "EventSourceArn": {"Fn::GetAtt": [f"Source{n}", "Arn"]},
            },
        }
    return {"Resources": resources}


@settings(suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(specs=mappings)
def test_every_once_consumer_is_found_and_nothing_else(tmp_path: Path, specs: list) -> None:
    for n, spec in enumerate(specs):
        if spec["asset"]:
            (tmp_path / f"asset.{n}").mkdir(exist_ok=True)
    found = _consumers("Shop", _template(specs, "Shop"), tmp_path)
    expected = [
        n
        for n, spec in enumerate(specs)
        if spec["once_env"] and spec["source"] == "AWS::SQS::Queue"
    ]
    assert [f.mapping_id for f in found] == [f"Mapping{n}" for n in expected]
    for n, consumer in zip(expected, found, strict=True):
        assert consumer.name == f"Consumer{n}" and consumer.stack == "Shop"
        assert consumer.function_id == f"Function{n}" and consumer.queue_id == f"Source{n}"
        assert consumer.asset == (tmp_path / f"asset.{n}" if specs[n]["asset"] else None)


def _stack(artifact: str, consumers: bool, deps: list[str]) -> StackFound:
    specs = (
        [{"once_env": True, "source": "AWS::SQS::Queue", "asset": False, "alias": False}]
        if consumers
        else []
    )
    return StackFound(artifact, artifact, _template(specs, artifact), [], deps)


def test_the_stacks_deployed_are_those_with_a_consumer_and_what_they_depend_on(
    tmp_path: Path,
) -> None:
    manifest = {"artifacts": {}}
    layout = {"Network": (False, []), "Shop": (True, ["Network"]), "Docs": (False, [])}
    for name, (consumers, deps) in layout.items():
        stack = _stack(name, consumers, deps)
        (tmp_path / f"{name}.template.json").write_text(json.dumps(stack.template))
        manifest["artifacts"][name] = {
            "type": "aws:cloudformation:stack",
            "properties": {"templateFile": f"{name}.template.json"},
            "dependencies": [*deps, f"{name}.assets"],
        }
        manifest["artifacts"][f"{name}.assets"] = {"type": "cdk:asset-manifest"}
    (tmp_path / "manifest.json").write_text(json.dumps(manifest))
    deployed = to_deploy(stacks_of(tmp_path))
    assert [s.name for s in deployed] == ["Network", "Shop"]
    assert [len(s.consumers) for s in deployed] == [0, 1]
