"""examples/orders, the app a team would write: it synthesizes with cdk-nag on, and its own
tests pass, run the way its team runs them (``pytest`` in its folder)."""

from __future__ import annotations

import ast
import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

ORDERS = Path(__file__).resolve().parents[2] / "examples" / "orders"
PUBLIC_MODULES = {"once", "once_cdk"}


@pytest.fixture(scope="module")
def orders(tmp_path_factory):
    """The orders app's cloud assembly and template (cdk-nag failing raises here)."""
    spec = importlib.util.spec_from_file_location("orders_app", ORDERS / "app.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    outdir = tmp_path_factory.mktemp("orders")
    assembly = module.build_app(str(outdir)).synth()
    return outdir, assembly.get_stack_by_name(module.STACK_NAME).template


def test_the_orders_app_synthesizes_clean_under_cdk_nag(orders):
    outdir, _ = orders
    report = json.loads((outdir / "validation-report.json").read_text())
    for plugin in report["pluginReports"]:
        assert plugin["violations"] == []
        assert plugin["conclusion"] == "success"


def test_the_orders_app_is_one_fifo_consumer_of_its_handler(orders):
    _, template = orders
    resources = template["Resources"].values()
    queues = [r["Properties"] for r in resources if r["Type"] == "AWS::SQS::Queue"]
    assert len(queues) == 2 and all(q["FifoQueue"] for q in queues)
    [function] = [r["Properties"] for r in resources if r["Type"] == "AWS::Lambda::Function"]
    assert function["Handler"] == "orders.handler.lambda_handler"
    assert function["Environment"]["Variables"]["POWERTOOLS_SERVICE_NAME"] == "orders"
    assert set(template["Outputs"]) >= {"QueueUrl", "DlqUrl", "IdempotencyTableName"}


def test_the_cfn_template_lints_clean(orders, cfn_lint):
    outdir, _ = orders
    cfn_lint([outdir / "Orders.template.json"])


def test_the_orders_app_imports_only_public_names():
    for path in [ORDERS / "app.py", *sorted((ORDERS / "src").rglob("*.py"))]:
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module:
                top = node.module.split(".")[0]
                if top in PUBLIC_MODULES:
                    assert node.module in PUBLIC_MODULES, f"{path.name}: {node.module}"


def test_the_orders_apps_own_tests_pass():
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"],
        cwd=ORDERS,
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert " passed" in result.stdout and "failed" not in result.stdout
