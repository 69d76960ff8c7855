"""The local cloud's synth cache is keyed by every input of the template: a change to any
file of the app, to the context, or to the installed once runtime and construct (the Lambda
asset's pinned dependencies among them) synthesizes again instead of deploying a stale
asset; caches, build products and tests do not."""

from __future__ import annotations

from pathlib import Path

import pytest

import once_cdk
from oncecli.localcloud import template
from oncecli.project import Project


@pytest.fixture
def project(tmp_path: Path) -> Project:
    for name, text in {
        "app.py": "app\n",
        "cdk.json": '{"app": "python3 app.py", "context": {"colour": "blue"}}\n',
        "src/orders/handler.py": "def handler(event, context): ...\n",
        "requirements.txt": "requests==2.32.3\n",
    }.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    return Project.at(tmp_path)


@pytest.mark.parametrize("changed", ["app.py", "src/orders/handler.py", "requirements.txt"])
def test_a_change_to_any_file_of_the_app_changes_the_synth_cache_key(
    project: Project, changed: str
) -> None:
    before = template._inputs_digest(project, {})
    (project.root / changed).write_text("changed\n")
    assert template._inputs_digest(project, {}) != before


def test_the_context_and_the_app_command_are_part_of_the_key(project: Project) -> None:
    before = template._inputs_digest(project, {})
    assert template._inputs_digest(project, {"stage": "other"}) != before
    other = Project(project.root, "python3 other.py", project.context)
    assert template._inputs_digest(other, {}) != before


@pytest.mark.parametrize(
    "ignored",
    [
        "src/orders/__pycache__/handler.cpython-311.pyc",
        "cdk.out/manifest.json",
        "build/localcloud/synth.log",
        "tests/test_handler.py",
        ".venv/lib/site.py",
    ],
)
def test_caches_outputs_and_tests_do_not_change_the_synth_cache_key(
    project: Project, ignored: str
) -> None:
    before = template._inputs_digest(project, {})
    (project.root / ignored).parent.mkdir(parents=True, exist_ok=True)
    (project.root / ignored).write_bytes(b"\0")
    assert template._inputs_digest(project, {}) == before


def test_the_lambda_asset_s_pinned_dependencies_are_an_input() -> None:
    pins = Path(once_cdk.__file__).parent / "requirements-lambda.txt"
    assert pins in template._files(pins.parent)


def test_cdk_json_context_is_read_and_cdk_context_json_overrides_it(project: Project) -> None:
    assert project.context == {"colour": "blue"}
    (project.root / "cdk.context.json").write_text('{"colour": "green"}')
    assert Project.at(project.root).context == {"colour": "green"}
