"""EventBridge's types the local cloud cannot run are stripped and named "not run locally",
and a function's environment variable that refers to one stands as its name (a ``Ref`` to one
its template names) or as ``arn:unresolved:<logical id>``, with a note, instead of failing the
deploy (``oncecli.localcloud.template.patch``). The adversarial review of issue 41 proved
that an ``AWS::Events::Archive`` broke the whole local deploy
(``tests/localcloud/test_eventbridge_types_not_run_locally.py`` runs it on the local cloud).
"""

from __future__ import annotations

from typing import Any

import pytest

from oncecli.localcloud.template import patch

NOT_RUN = [
    "AWS::Events::Archive",
    "AWS::Events::Connection",
    "AWS::Events::ApiDestination",
    "AWS::Events::Endpoint",
    "AWS::Pipes::Pipe",
    "AWS::Scheduler::Schedule",
]


def _function(variables: dict[str, Any]) -> dict[str, Any]:
    return {
        "Type": "AWS::Lambda::Function",
        "Properties": {"Environment": {"Variables": variables}},
    }


@pytest.mark.parametrize("kind", NOT_RUN)
def test_each_eventbridge_type_not_run_is_stripped_and_named(kind: str) -> None:
    patched = patch({"Resources": {"Part": {"Type": kind, "Properties": {}}}}, "Shop")
    assert patched.deployable["Resources"] == {}
    (stripped,) = patched.stripped
    assert (stripped.kind, stripped.logical_id) == (kind, "Part")
    assert "not run locally" in str(stripped)


def test_a_ref_to_a_named_archive_stands_as_its_name() -> None:
    template = {
        "Resources": {
            "Archive": {"Type": "AWS::Events::Archive", "Properties": {"ArchiveName": "orders"}},
            "Function": _function({"ARCHIVE": {"Ref": "Archive"}, "OTHER": "kept"}),
        }
    }
    patched = patch(template, "Shop")
    variables = patched.deployable["Resources"]["Function"]["Properties"]["Environment"]
    assert variables["Variables"] == {"ARCHIVE": "orders", "OTHER": "kept"}
    assert any("environment variable ARCHIVE of Function" in n for n in patched.notes)
    assert template["Resources"]["Function"]["Properties"]["Environment"]["Variables"][
        "ARCHIVE"
    ] == {"Ref": "Archive"}  # the synthesized template is left as it was


def test_what_cannot_be_named_stands_unresolved() -> None:
    template = {
        "Resources": {
            "Archive": {"Type": "AWS::Events::Archive", "Properties": {}},
            "Function": _function(
                {"ARCHIVE": {"Ref": "Archive"}, "ARN": {"Fn::GetAtt": ["Archive", "Arn"]}}
            ),
        }
    }
    patched = patch(template, "Shop")
    variables = patched.deployable["Resources"]["Function"]["Properties"]["Environment"]
    assert variables["Variables"] == {
        "ARCHIVE": "arn:unresolved:Archive",
        "ARN": "arn:unresolved:Archive",
    }
    assert sorted(patched.deployable["Resources"]) == ["Function"]
