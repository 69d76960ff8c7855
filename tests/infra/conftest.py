"""Synthesizes each stage once per session (cdk-nag included) for the infra tests.

A synth takes seconds, so every test of a stage reads the same cloud assembly; the Lambda
asset's dependencies come from the bundling cache under build/lambda-deps/.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
from pathlib import Path
from typing import Any

# jsii starts $JSII_NODE (default: `node` on PATH) when aws_cdk is imported: the Node.js LTS
# that npm installed from package.json, the one `npx cdk` runs the app with.
os.environ.setdefault(
    "JSII_NODE",
    shutil.which("node", path=Path(__file__).resolve().parents[2] / "node_modules" / ".bin")
    or "node",
)

import pytest
from aws_cdk import assertions

from infra.app import build_app
from infra.stack import OnceStack
from infra.stages import STAGES, StageSettings

ALARM_EMAIL = "oncall@example.com"
#: Extra context per stage: prod also proves the optional e-mail subscription.
STAGE_CONTEXT: dict[str, dict[str, str]] = {"prod": {"alarm_email": ALARM_EMAIL}}


@dataclasses.dataclass
class Synth:
    """One synthesized stage: the stack object, its template and the assembly directory."""

    stage: str
    stack: OnceStack
    template: dict[str, Any]
    outdir: Path

    @property
    def settings(self) -> StageSettings:
        return self.stack.settings

    @property
    def assertions(self) -> assertions.Template:
        return assertions.Template.from_json(self.template)

    @property
    def template_path(self) -> Path:
        return self.outdir / f"{self.stack.stack_name}.template.json"

    def resources(self, kind: str) -> dict[str, dict[str, Any]]:
        return {k: v for k, v in self.template["Resources"].items() if v["Type"] == kind}

    def one(self, kind: str) -> tuple[str, dict[str, Any]]:
        found = self.resources(kind)
        assert len(found) == 1, f"expected one {kind}, found {sorted(found)}"
        return next(iter(found.items()))

    def logical_id(self, construct: Any) -> str:
        return self.stack.resolve(self.stack.get_logical_id(construct.node.default_child))

    def validation_report(self) -> dict[str, Any]:
        return json.loads((self.outdir / "validation-report.json").read_text())


_cache: dict[str, Synth] = {}


def synthesize(stage: str, tmp_path_factory: pytest.TempPathFactory) -> Synth:
    if stage not in _cache:
        outdir = tmp_path_factory.mktemp(f"cdk-{stage}")
        app, stack = build_app({"stage": stage, **STAGE_CONTEXT.get(stage, {})}, str(outdir))
        assembly = app.synth()  # raises on any unacknowledged cdk-nag finding
        template = assembly.get_stack_by_name(stack.stack_name).template
        _cache[stage] = Synth(stage, stack, template, outdir)
    return _cache[stage]


@pytest.fixture(scope="session", params=STAGES)
def synth(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Synth:
    """Each stage in turn."""
    return synthesize(request.param, tmp_path_factory)


@pytest.fixture(scope="session")
def dev(tmp_path_factory: pytest.TempPathFactory) -> Synth:
    return synthesize("dev", tmp_path_factory)


@pytest.fixture(scope="session")
def prod(tmp_path_factory: pytest.TempPathFactory) -> Synth:
    return synthesize("prod", tmp_path_factory)


@pytest.fixture(scope="session")
def local(tmp_path_factory: pytest.TempPathFactory) -> Synth:
    return synthesize("local", tmp_path_factory)


@pytest.fixture(scope="session")
def all_stages(tmp_path_factory: pytest.TempPathFactory) -> list[Synth]:
    return [synthesize(stage, tmp_path_factory) for stage in STAGES]
