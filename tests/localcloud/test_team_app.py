"""A team's own app, as a new user makes it: outside the repository, once installed from
the checkout (not editable), a handler and an ``app.py`` with two ``OnceConsumer``s in two
stacks (one with SnapStart on: its mapping invokes an alias), and a ``cdk.json``.
``once up`` runs it; ``once send`` twice shows a DUPLICATE in ``once status``; the team's
own integration tests pass on the ``once_cloud`` fixture.

The team's code is not ours: its business code logs with its own Logger and publishes its
own Powertools metrics, in its own namespace, beside once's.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import sysconfig
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from oncecli.project import ROOT
from tests.localcloud.helpers import write_project

HANDLER = '''
"""The shop's orders: charge each order once."""

import once
from aws_lambda_powertools import Logger, Metrics
from aws_lambda_powertools.metrics import MetricUnit
from once import PermanentError, make_handler

logger = Logger(service="shop-team")
metrics = Metrics(namespace="ShopTeam", service="shop-team")


def charge(order, attempt):
    if order["amount"] < 0:
        raise PermanentError("a negative amount cannot be charged")
    logger.info("charging", extra={"order": attempt.key})
    metrics.add_metric(name="Charged", unit=MetricUnit.Count, value=1)
    metrics.flush_metrics()
    # Where the runtime came from: the function's own asset, not the CLI's environment.
    return {"charged": order["amount"], "runtime": once.__file__}


handler = make_handler(charge, key="orderId")
'''

NOTICES = """
from once import make_handler


def notify(notice, attempt):
    return {"sent_to": notice["to"]}


handler = make_handler(notify, key="noticeId")
"""

APP = """
import aws_cdk as cdk
from once_cdk import OnceConsumer, add_cli_outputs

app = cdk.App()
shop = cdk.Stack(app, "Shop")
orders = OnceConsumer(
    shop, "Orders", code_dir="src", handler="shop.handler.handler", service_name="shop",
    timeout=cdk.Duration.seconds(3),
)
add_cli_outputs(orders)
mail = cdk.Stack(app, "Mail")
notices = OnceConsumer(
    mail, "Notices", code_dir="mail", handler="notices.handler.handler",
    service_name="notices", timeout=cdk.Duration.seconds(3), snap_start=True,
)
add_cli_outputs(notices)
app.synth()
"""

TEAM_TEST = """
import json

from once.models import Record
from once.testing import Quarantined


def test_a_repeated_order_is_charged_once(once_cloud):
    assert once_cloud.stacks == ["Mail", "Shop"]
    order = {"orderId": "o-1", "amount": 30}
    once_cloud.send("Shop", [order, order])
    once_cloud.send("Shop", [{"orderId": "o-2", "amount": -1}])
    once_cloud.send("Mail", [{"noticeId": "n-1", "to": "ops"}])
    once_cloud.drain()

    record = once_cloud.record("Shop", "o-1")
    assert isinstance(record, Record)  # as once_env.record returns it
    assert record.status == "COMPLETED" and record.fence == 1
    result = json.loads(record.result)
    assert result["charged"] == 30
    assert "/asset." in result["runtime"]
    counts = once_cloud.metrics("Shop")
    assert counts["Processed"] == 1 and counts["Duplicate"] == 1
    assert counts["Quarantined"] == 1
    (dead,) = once_cloud.dlq_messages("Shop")
    assert isinstance(dead, Quarantined)  # as once_env.dlq_messages gives them
    assert dead.attributes["once.reason"] == "PERMANENT_ERROR" == dead.reason
    assert '"o-2"' in dead.body
    assert json.loads(once_cloud.record("Mail", "n-1").result) == {"sent_to": "ops"}
    assert once_cloud.metrics("Mail")["Processed"] == 1


def test_each_consumer_s_names_are_what_its_stack_deployed(once_cloud):
    names = once_cloud.names("Shop")
    assert (names.stack, names.consumer) == ("Shop", "Orders")
    outputs = once_cloud.outputs("Shop")  # as CloudFormation has them (add_cli_outputs)
    assert (names.queue_url, names.dlq_url, names.table_name) == (
        outputs["QueueUrl"], outputs["DlqUrl"], outputs["IdempotencyTableName"]
    )
    function = once_cloud.client("lambda").get_function_configuration(
        FunctionName=names.function_name
    )
    assert function["Environment"]["Variables"]["IDEMPOTENCY_TABLE_NAME"] == names.table_name
    described = once_cloud.client("dynamodb").describe_table(TableName=names.table_name)
    assert described["Table"]["TableName"] == names.table_name
    attributes = once_cloud.client("sqs").get_queue_attributes(
        QueueUrl=names.queue_url, AttributeNames=["RedrivePolicy"]
    )["Attributes"]
    dlq_arn = once_cloud.client("sqs").get_queue_attributes(
        QueueUrl=names.dlq_url, AttributeNames=["QueueArn"]
    )["Attributes"]["QueueArn"]
    assert json.loads(attributes["RedrivePolicy"])["deadLetterTargetArn"] == dlq_arn
    assert once_cloud.names("Mail").table_name != names.table_name
"""


def _source_tree(destination: Path) -> Path:
    """The checkout's files (tracked, and new ones not ignored), without its build/."""
    listed = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.splitlines()
    for name in listed:
        source = ROOT / name
        if source.is_file() and not name.startswith(("tests/", "docs/", "examples/")):
            target = destination / name
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target)
    return destination


@pytest.fixture(scope="module")
def team(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, dict[str, str]]]:
    """A venv with once installed from the checkout, and the team's project beside it."""
    base = tmp_path_factory.mktemp("team")
    venv = base / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    site = next((venv / "lib").glob("python3*/site-packages"))
    # The dependencies are the project's own environment's (no network in the test); once
    # itself is installed from the checkout, not editable, as a team installs it.
    (site / "deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    # Built with this environment's setuptools, installed with the new venv's pip.
    subprocess.run(
        [
            sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--no-build-isolation",
            "--disable-pip-version-check", "-w", str(base / "dist"),
            str(_source_tree(base / "once-src")),
        ],
        check=True,
    )  # fmt: skip
    (wheel,) = (base / "dist").glob("once-*.whl")
    subprocess.run(
        [
            str(venv / "bin" / "python"), "-m", "pip", "install", "--quiet", "--no-deps",
            "--disable-pip-version-check", str(wheel),
        ],
        check=True,
    )  # fmt: skip
    project = base / "shop"
    write_project(
        project,
        {
            "src/shop/__init__.py": "",
            "src/shop/handler.py": HANDLER,
            "mail/notices/__init__.py": "",
            "mail/notices/handler.py": NOTICES,
            "app.py": APP,
            "cdk.json": '{"app": "python3 app.py"}\n',
            "tests/test_integration.py": TEAM_TEST,
        },
    )
    env = {
        **os.environ,
        "PATH": f"{venv / 'bin'}{os.pathsep}{os.environ['PATH']}",
        "VIRTUAL_ENV": str(venv),
        "COLUMNS": "200",
    }
    env.pop("PYTHONPATH", None)
    yield project, env


def _once(args: list[str], project: Path, env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["once", *args], cwd=project, env=env, capture_output=True, text=True, timeout=120
    )


def test_the_installed_package_is_not_the_checkout(team: tuple[Path, dict[str, str]]) -> None:
    project, env = team
    run = subprocess.run(
        ["python", "-c", "import once, oncecli; print(once.__file__, oncecli.__file__)"],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    assert str(ROOT) not in run.stdout and "site-packages" in run.stdout


def test_once_up_runs_a_team_s_app_and_status_shows_the_duplicate(
    team: tuple[Path, dict[str, str]],
) -> None:
    project, env = team
    up = subprocess.Popen(
        ["once", "up", "--port", "0"],
        cwd=project,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        lines = []
        assert up.stdout is not None
        for line in up.stdout:
            lines.append(line)
            if "Ctrl-C stops" in line:
                break
        output = "".join(lines)
        assert "Ctrl-C stops" in output, output[-3000:]
        assert "Shop is up (Orders)" in output and "Mail is up (Notices)" in output
        endpoint = re.search(r"--endpoint-url (http://127\.0\.0\.1:\d+)", output)
        assert endpoint, output
        where = ["--endpoint-url", endpoint.group(1)]
        body = project / "order.jsonl"
        body.write_text('{"orderId": "o-7", "amount": 12}\n')
        for _ in range(2):
            sent = _once(["send", str(body), "--key", "orderId", "--stack", "Shop", *where],
                         project, env)  # fmt: skip
            assert sent.returncode == 0, sent.stderr
        ambiguous = _once(["status", *where], project, env)
        assert ambiguous.returncode != 0 and "Mail, Shop" in ambiguous.stderr
        deadline = time.monotonic() + 90
        status = ""
        while time.monotonic() < deadline:
            status = _once(["status", "--stack", "Shop", *where], project, env).stdout
            if re.search(r"Duplicate\s*│\s*1\b", status):
                break
            time.sleep(1)
        assert re.search(r"Processed\s*│\s*1\b", status), status
        assert re.search(r"Duplicate\s*│\s*1\b", status), status
        assert re.search(r"records COMPLETED\s*│\s*1\b", status), status
        record = _once(["inspect", "o-7", "--stack", "Shop", *where], project, env)
        assert "COMPLETED" in record.stdout and "/asset." in record.stdout, record.stdout
        watch = subprocess.Popen(
            ["once", "status", "--stack", "Shop", *where, "--watch", "0.2"],
            cwd=project,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        time.sleep(3)  # a few refreshes, however slow: the view ends at Ctrl-C, not by itself
        watch.send_signal(signal.SIGINT)
        watched, _ = watch.communicate(timeout=60)
        assert watch.returncode == 0 and re.search(r"Duplicate\s*│\s*1\b", watched), watched
    finally:
        up.send_signal(signal.SIGINT)
        up.wait(60)
    assert up.returncode in (0, 130)


def test_the_team_s_integration_tests_pass_on_once_cloud(
    team: tuple[Path, dict[str, str]],
) -> None:
    project, env = team
    run = subprocess.run(
        ["python", "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests"],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-2000:]
    assert "2 passed" in run.stdout
