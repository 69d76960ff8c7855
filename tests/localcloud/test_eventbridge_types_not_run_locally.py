"""EventBridge's types the local cloud cannot run (an archive, a connection, an API
destination, a global endpoint, a pipe, a schedule) never break a deploy: each is stripped
from the template and named ("not run locally"), as the local cloud does for the other types
it does not run (``oncecli/localcloud/template.py``), and a ``Ref`` to one in a function's
environment stands as its name (its template's ``ArchiveName``, ``Name``) or, unnamed, as
``arn:unresolved:<logical id>`` with a note: ``GetFunctionConfiguration`` answers and the
consumers keep their alarms.

On AWS an archive is an ordinary resource: ``AWS::Events::Archive`` takes its ``EventPattern``
as a JSON object and its ``Ref`` is the archive's name
(https://docs.aws.amazon.com/AWSCloudFormation/latest/TemplateReference/aws-resource-events-archive.html).
The adversarial review of issue 41 proved that moto's archive broke the whole local deploy:
its CloudFormation passed CDK's pattern object to ``json.loads`` (exit 8), and, without a
pattern, its missing physical id made a ``Ref`` to it in a function's environment fail
``GetFunctionConfiguration`` (HTTP 500).
"""

from __future__ import annotations

import os
import sys
import textwrap
import warnings
from pathlib import Path

import pytest

from oncecli.testing.cloud import OnceCloud, StrippedResourceWarning

HANDLER = """
from once import make_handler


def sink(event, attempt):
    return {"seen": event["orderId"]}


sink_handler = make_handler(sink, key="orderId")
"""

APP = """
import aws_cdk as cdk
from aws_cdk import aws_events as events
from aws_cdk import aws_events_targets as targets
from once_cdk import OnceConsumer, add_cli_outputs

app = cdk.App()
stack = cdk.Stack(app, "Shop")
bus = events.EventBus(stack, "Bus")
placed = events.EventPattern(source=["shop.orders"])
ARCHIVE
sink = OnceConsumer(stack, "Sink", handler="shop.handler.sink_handler", service_name="sink",
                    code_dir="src", timeout=cdk.Duration.seconds(3), environment=ENVIRONMENT)
events.Rule(stack, "Placed", event_bus=bus, event_pattern=placed, targets=[
    targets.SqsQueue(sink.queue, message=events.RuleTargetInput.from_event_path("$.detail"))
])
add_cli_outputs(sink)
app.synth()
"""

#: An OnceConsumer's alarms (docs/localcloud.md, "Alarms").
ALARMS = 9


def _project(root: Path, archive: str, environment: str) -> Path:
    files = {
        "src/shop/__init__.py": "",
        "src/shop/handler.py": HANDLER,
        "app.py": APP.replace("ARCHIVE", archive).replace("ENVIRONMENT", environment),
        "cdk.json": '{"app": "python3 app.py"}\n',
    }
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(textwrap.dedent(text))
    return root


@pytest.fixture(autouse=True)
def _venv_on_path(monkeypatch: pytest.MonkeyPatch) -> None:
    """cdk.json runs ``python3 app.py``: this interpreter's, with aws_cdk."""
    monkeypatch.setenv("PATH", f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")


def _runs(project: Path) -> list[str]:
    """The stack deploys and its consumer keeps its alarms; the archive is named as not run
    locally. The local cloud's notes, returned."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", StrippedResourceWarning)
        with OnceCloud(project, workers=1) as cloud:
            assert cloud.cloud is not None
            assert len(cloud.cloud.alarm_names) == ALARMS, cloud.cloud.notes
            notes = list(cloud.cloud.notes)
    named = [str(w.message) for w in caught if issubclass(w.category, StrippedResourceWarning)]
    assert any("AWS::Events::Archive" in w and "not run locally" in w for w in named), named
    return notes


def test_a_stack_with_an_archive_of_its_bus_runs_without_it(tmp_path: Path) -> None:
    archive = 'bus.archive("Archive", event_pattern=placed)'
    _runs(_project(tmp_path / "shop", archive, "None"))


def test_an_archive_s_ref_in_a_function_s_environment_stands_named_and_breaks_nothing(
    tmp_path: Path,
) -> None:
    archive = 'archive = events.CfnArchive(stack, "Archive", source_arn=bus.event_bus_arn)'
    notes = _runs(_project(tmp_path / "shop", archive, '{"ARCHIVE": archive.ref}'))
    assert any(
        "environment variable ARCHIVE" in note and "arn:unresolved:Archive" in note
        for note in notes
    ), notes
