"""Synthesizes each app once per session (cdk-nag included) for the infra tests.

A synth takes seconds, so every test of a variant reads the same cloud assembly; the Lambda
asset's dependencies come from the bundling cache (``once_cdk.bundling.cache_dir()``).

Two kinds of apps are synthesized: the example app's variants (``synth``: dev, prod, local
and local with a FIFO queue) and bare stacks that hold only an ``OnceConsumer``
(``bare``: standard and FIFO), which test the construct apart from the example.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

# jsii starts $JSII_NODE (default: `node` on PATH) when aws_cdk is imported: the Node.js LTS
# that npm installed from package.json, the one `npx cdk` runs the app with.
os.environ.setdefault(
    "JSII_NODE",
    shutil.which("node", path=Path(__file__).resolve().parents[2] / "node_modules" / ".bin")
    or "node",
)

import aws_cdk as cdk
import pytest
from aws_cdk import assertions

from infra.app import add_compliance_checks, build_app
from once_cdk import OnceConsumer

ALARM_EMAIL = "oncall@example.com"
#: The example app's variants: the context each one is synthesized with. prod also proves
#: the optional e-mail subscription; local-fifo is what `make demo ARGS=--fifo` deploys.
VARIANTS: dict[str, dict[str, str]] = {
    "dev": {"stage": "dev"},
    "prod": {"stage": "prod", "alarm_email": ALARM_EMAIL},
    "local": {"stage": "local"},
    "local-fifo": {"stage": "local", "fifo": "true"},
}
#: The bare stacks: an OnceConsumer with its defaults, standard and FIFO.
BARE_STACK = "Bare"
BARE_KINDS = ("standard", "fifo")
HANDLER_SOURCE = "def lambda_handler(event, context):\n    return {'batchItemFailures': []}\n"
#: Every acknowledged cdk-nag finding of an OnceConsumer: (rule, construct path below the
#: consumer). Adding one is a reviewed change; its reason sits next to the resource.
CONSTRUCT_ACKNOWLEDGMENTS = {
    ("AwsSolutions-IAM5[Resource::*]", "Role/DefaultPolicy/Resource"),
    ("AwsSolutions-L1", "Function/Resource"),
    ("Serverless-LambdaLatestVersion", "Function/Resource"),
    ("Serverless-LambdaDLQ", "Function/Resource"),
    ("Serverless-LambdaEventSourceMappingDestination", "Mapping/Resource"),
    ("Serverless-SQSRedrivePolicy", "Dlq/Resource"),
}
#: cfn-lint's console script, run with this interpreter (cfnlint has no __main__).
_CFN_LINT = (
    "import sys; from cfnlint.runner import main; sys.argv[0] = 'cfn-lint'; sys.exit(main())"
)


@dataclasses.dataclass
class Synth:
    """One synthesized stack: the stack object, its template and the assembly directory."""

    name: str
    stack: cdk.Stack
    consumer: OnceConsumer
    template: dict[str, Any]
    outdir: Path

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

    def props(self, construct: Any) -> dict[str, Any]:
        return self.template["Resources"][self.logical_id(construct)]["Properties"]

    def validation_report(self) -> dict[str, Any]:
        return json.loads((self.outdir / "validation-report.json").read_text())

    def acknowledged_findings(self) -> set[tuple[str, str]]:
        """(rule, construct path below the stack) of every acknowledged cdk-nag finding;
        each acknowledgment must give a reason of a dozen words or more."""
        found = set()
        for plugin in self.validation_report()["pluginReports"]:
            for suppressed in plugin.get("suppressedViolations", []):
                assert len(suppressed["reason"].split()) >= 12, suppressed["reason"]
                for construct in suppressed["violatingConstructs"]:
                    path = construct["constructPath"].removeprefix(f"{self.stack.stack_name}/")
                    found.add((suppressed["ruleName"], path))
        return found

    def construct_acknowledgments(self) -> set[tuple[str, str]]:
        """The construct's own acknowledgments, at this stack's consumer."""
        prefix = self.consumer.node.id
        return {(rule, f"{prefix}/{path}") for rule, path in CONSTRUCT_ACKNOWLEDGMENTS}

    def asset_dir(self) -> Path:
        _, function = self.one("AWS::Lambda::Function")
        key = function["Properties"]["Code"]["S3Key"].removesuffix(".zip")
        return self.outdir / f"asset.{key}"


_cache: dict[str, Synth] = {}


def _cfn_lint(paths: Iterable[Path]) -> None:
    # W3005 (a DependsOn that a GetAtt already implies) is how CDK writes every function.
    result = subprocess.run(
        [sys.executable, "-c", _CFN_LINT, "--ignore-checks", "W3005", "--", *map(str, paths)],
        capture_output=True,
        text=True,
        check=False,
    )
    errors, warnings = result.returncode & 2, result.returncode & 4
    assert not errors and not warnings, result.stdout + result.stderr
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.fixture(scope="session")
def cfn_lint() -> Callable[[Iterable[Path]], None]:
    """Asserts that cfn-lint finds no error or warning in the given templates."""
    return _cfn_lint


def _synthesize(name: str, app: cdk.App, stack: cdk.Stack, consumer: OnceConsumer) -> Synth:
    assembly = app.synth()  # raises on any unacknowledged cdk-nag finding
    template = assembly.get_stack_by_name(stack.stack_name).template
    return Synth(name, stack, consumer, template, Path(app.outdir))


def synthesize(variant: str, tmp_path_factory: pytest.TempPathFactory) -> Synth:
    """The example app, one variant."""
    if variant not in _cache:
        outdir = tmp_path_factory.mktemp(f"cdk-{variant}")
        app, stack = build_app(VARIANTS[variant], str(outdir))
        _cache[variant] = _synthesize(variant, app, stack, stack.consumer)
    return _cache[variant]


def code_dir(root: Path) -> Path:
    """A user's code folder: ``orders/handler.py`` at its root, and tests that must not ship."""
    package = root / "src" / "orders"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "handler.py").write_text(HANDLER_SOURCE)
    (root / "src" / "tests").mkdir()
    (root / "src" / "tests" / "test_handler.py").write_text("")
    return root / "src"


def synthesize_bare(kind: str, tmp_path_factory: pytest.TempPathFactory) -> Synth:
    """A stack holding only an OnceConsumer with its defaults, cdk-nag on."""
    name = f"bare-{kind}"
    if name not in _cache:
        root = tmp_path_factory.mktemp(name)
        app = cdk.App(outdir=str(root / "cdk.out"))
        stack = cdk.Stack(app, BARE_STACK)
        consumer = OnceConsumer(
            stack,
            "Orders",
            code_dir=code_dir(root),
            handler="orders.handler.lambda_handler",
            service_name="orders",
            fifo=kind == "fifo",
        )
        add_compliance_checks(app)
        _cache[name] = _synthesize(name, app, stack, consumer)
    return _cache[name]


@pytest.fixture(scope="session", params=list(VARIANTS))
def synth(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Synth:
    """Each variant of the example app in turn."""
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
def local_fifo(tmp_path_factory: pytest.TempPathFactory) -> Synth:
    return synthesize("local-fifo", tmp_path_factory)


@pytest.fixture(scope="session")
def all_variants(tmp_path_factory: pytest.TempPathFactory) -> list[Synth]:
    return [synthesize(variant, tmp_path_factory) for variant in VARIANTS]


@pytest.fixture(scope="session", params=BARE_KINDS)
def bare(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Synth:
    """A bare OnceConsumer stack, standard and FIFO in turn."""
    return synthesize_bare(request.param, tmp_path_factory)


@pytest.fixture(scope="session")
def bare_standard(tmp_path_factory: pytest.TempPathFactory) -> Synth:
    return synthesize_bare("standard", tmp_path_factory)


@pytest.fixture(scope="session")
def bare_fifo(tmp_path_factory: pytest.TempPathFactory) -> Synth:
    return synthesize_bare("fifo", tmp_path_factory)
