"""A team's app on the local cloud has its ``OnceConsumer``'s alarms in the local CloudWatch,
evaluated against the metrics its workers publish: ``DescribeAlarms`` and ``once status``
show each one's state, and name those not evaluated locally (on AWS/SQS and AWS/Lambda
metrics, which the local cloud does not have).

- A healthy run leaves the alarms on once's metrics OK (the positive control).
- Business code raising ``PermanentError`` quarantines every message: once counts them as
  ``Quarantined``, which no alarm on once's metrics watches; on AWS the DLQ's depth
  (``DlqDepth``, an AWS/SQS metric) fires, and locally that alarm is named as not evaluated.
- A business key sent again with a different payload is a ``Conflict``: its alarm goes to
  ALARM, in ``DescribeAlarms`` (the local cloud's evaluator thread) and in ``once status``.

Each evaluation with an explicit clock is exact (the minute after the data's minute) and
sets no state; what the evaluator thread sets is polled for with generous limits, with
conflicts kept coming so that the alarm stays in ALARM however slow the machine.
"""

from __future__ import annotations

import time
import uuid
import warnings
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from oncecli.localcloud.alarm_rules import ALARM, INSUFFICIENT_DATA, OK
from tests.localcloud.helpers import write_project

HANDLER = '''
"""The shop's orders: charge each order once; an order marked poison can never be charged."""

from once import PermanentError, make_handler


def charge(order, attempt):
    if order.get("poison"):
        raise PermanentError("this order can never be charged")
    return {"charged": order["amount"]}


handler = make_handler(charge, key="orderId")
'''

APP = """
import aws_cdk as cdk
from once_cdk import OnceConsumer, add_cli_outputs

app = cdk.App()
stack = cdk.Stack(app, "Shop")
orders = OnceConsumer(
    stack, "Orders", code_dir="src", handler="shop.handler.handler", service_name="shop",
    timeout=cdk.Duration.seconds(3),
)
add_cli_outputs(orders)
app.synth()
"""

STACK = "Shop"
#: The alarms on AWS's own metrics, which the local cloud does not evaluate.
NOT_LOCAL = ("DlqDepth", "OldestMessageAge", "FunctionErrors", "FunctionThrottles")
LOCAL = ("FailedRecords", "LeaseLost", "Conflict", "LeaseExpired", "InternalError")
#: How long a condition is polled for: the machine may be slow, never wrong.
POLL_S = 300


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("alarms-team") / "shop"
    write_project(
        root,
        {
            "src/shop/__init__.py": "",
            "src/shop/handler.py": HANDLER,
            "app.py": APP,
            "cdk.json": '{"app": "python3 app.py"}\n',
        },
    )
    return root


@pytest.fixture(scope="module")
def once_cloud(project: Path) -> Iterator[Any]:
    try:
        from oncecli.testing.cloud import OnceCloud
    except ImportError:  # where the fixture lived before
        from once.testing.cloud import OnceCloud  # type: ignore[no-redef]

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the stripped parts: test_sns_subscriptions' matter
        started = OnceCloud(project).__enter__()
    try:
        yield started
    finally:
        started.__exit__()


def _names(once_cloud: Any) -> dict[str, str]:
    """Each alarm's short name (``Conflict``) -> its name in the local CloudWatch."""
    return {name.rsplit("-", 1)[-1]: name for name in once_cloud.cloud.alarm_names}


def _latest(once_cloud: Any, metric: str) -> int:
    """The start of the latest minute with a datapoint of the consumer's ``metric``."""
    cloudwatch = once_cloud.client("cloudwatch")
    now = time.time()
    response = cloudwatch.get_metric_data(
        MetricDataQueries=[
            {
                "Id": "m",
                "MetricStat": {
                    "Metric": {
                        "Namespace": "Once",
                        "MetricName": metric,
                        "Dimensions": [{"Name": "service", "Value": "shop"}],
                    },
                    "Period": 60,
                    "Stat": "Sum",
                },
            }
        ],
        StartTime=datetime.fromtimestamp(now - now % 60 - 3600, UTC),
        EndTime=datetime.fromtimestamp(now - now % 60 + 120, UTC),
    )
    (result,) = response["MetricDataResults"]
    assert result["Timestamps"], f"no {metric} datapoint"
    return max(int(t.timestamp()) for t in result["Timestamps"])


def _wait_for_count(once_cloud: Any, metric: str, at_least: int) -> dict[str, int]:
    deadline = time.monotonic() + POLL_S
    counts = once_cloud.metrics(STACK)
    while counts[metric] < at_least and time.monotonic() < deadline:
        time.sleep(0.5)
        counts = once_cloud.metrics(STACK)  # ships the workers' new EMF lines
    assert counts[metric] >= at_least, counts
    return dict(counts)


def _states(once_cloud: Any) -> dict[str, dict[str, Any]]:
    described = once_cloud.client("cloudwatch").describe_alarms(
        AlarmNames=once_cloud.cloud.alarm_names
    )["MetricAlarms"]
    return {alarm["AlarmName"].rsplit("-", 1)[-1]: alarm for alarm in described}


def test_every_alarm_of_the_consumer_is_in_the_local_cloudwatch(once_cloud: Any) -> None:
    names = _names(once_cloud)
    assert sorted(names) == sorted(LOCAL + NOT_LOCAL)
    assert all(name.startswith(f"{STACK}-Orders-") for name in names.values())
    states = _states(once_cloud)
    for short in NOT_LOCAL:
        assert states[short]["StateValue"] == INSUFFICIENT_DATA
        assert states[short]["StateReason"].startswith("not evaluated locally: AWS/")
    # Still named as not run: no alarm acts locally.
    stripped = {p.logical_id: p.why for p in once_cloud.cloud.stripped if "Alarm" in p.kind}
    assert len(stripped) == 9
    assert all("its actions never run locally" in why for why in stripped.values())


def test_a_healthy_run_leaves_the_alarms_ok(once_cloud: Any) -> None:
    run = uuid.uuid4().hex[:8]
    once_cloud.send(STACK, [{"orderId": f"ok-{run}-{n}", "amount": n} for n in range(6)])
    once_cloud.drain()
    _wait_for_count(once_cloud, "Processed", 6)
    minute = _latest(once_cloud, "Processed")
    verdicts = once_cloud.cloud.evaluate_alarms(now=minute + 61, set_states=False)
    by_short = {name.rsplit("-", 1)[-1]: v for name, v in verdicts.items()}
    for short in LOCAL:
        assert by_short[short].state == OK, (short, by_short[short].reason)
    # The share was computed from the run's outcomes: 0% failed, not a missing datapoint.
    assert (minute, 0.0) in by_short["FailedRecords"].datapoints
    for short in NOT_LOCAL:
        assert by_short[short].state == INSUFFICIENT_DATA
    # The evaluator thread reaches the same: OK, no longer the initial INSUFFICIENT_DATA.
    deadline = time.monotonic() + POLL_S
    while time.monotonic() < deadline and _states(once_cloud)["Conflict"]["StateValue"] != OK:
        time.sleep(0.5)
    assert _states(once_cloud)["Conflict"]["StateValue"] == OK


def test_permanent_errors_are_quarantined_and_only_the_dlq_alarm_would_fire_on_aws(
    once_cloud: Any,
) -> None:
    run = uuid.uuid4().hex[:8]
    before = _wait_for_count(once_cloud, "Quarantined", 0)["Quarantined"]
    once_cloud.send(STACK, [{"orderId": f"p-{run}-{n}", "amount": 1, "poison": True}
                            for n in range(5)])  # fmt: skip
    once_cloud.drain()
    _wait_for_count(once_cloud, "Quarantined", before + 5)
    reasons = [m.reason for m in once_cloud.dlq_messages(STACK)]
    assert reasons.count("PERMANENT_ERROR") >= 5
    minute = _latest(once_cloud, "Quarantined")
    verdicts = once_cloud.cloud.evaluate_alarms(now=minute + 61, set_states=False)
    by_short = {name.rsplit("-", 1)[-1]: v for name, v in verdicts.items()}
    # A quarantine is not a failure (the record is done with) nor a conflict.
    assert by_short["FailedRecords"].state == OK, by_short["FailedRecords"].reason
    assert by_short["Conflict"].state == OK
    # On AWS, DlqDepth fires on these messages; its metric is AWS/SQS's, not here.
    assert by_short["DlqDepth"].state == INSUFFICIENT_DATA
    assert by_short["DlqDepth"].reason.startswith("not evaluated locally: AWS/SQS")


def _status(once_cloud: Any, capsys: pytest.CaptureFixture[str]) -> str:
    from oncecli.cli import main

    endpoint = once_cloud.cloud.endpoints["sqs"]
    assert main(["status", "--stack", STACK, "--endpoint-url", endpoint]) == 0
    return capsys.readouterr().out


def _conflict(once_cloud: Any) -> None:
    key = f"c-{uuid.uuid4().hex[:8]}"
    once_cloud.send(STACK, [{"orderId": key, "amount": 1}])
    once_cloud.drain()
    once_cloud.send(STACK, [{"orderId": key, "amount": 2}])  # the same key, another payload
    once_cloud.drain()


def test_a_conflict_puts_the_conflict_alarm_in_alarm_in_describe_alarms_and_once_status(
    once_cloud: Any, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "250")
    before = _wait_for_count(once_cloud, "Conflict", 0)["Conflict"]
    _conflict(once_cloud)
    _wait_for_count(once_cloud, "Conflict", before + 1)
    minute = _latest(once_cloud, "Conflict")
    # Exact: in the minute after the conflict's, the alarm is in ALARM; the next, OK again.
    cloud = once_cloud.cloud
    (conflict_name,) = [n for n in cloud.alarm_names if n.endswith("-Conflict")]
    verdict = cloud.evaluate_alarms(now=minute + 61, set_states=False)[conflict_name]
    assert verdict.state == ALARM, verdict.reason
    assert "1 out of the last 1 datapoints" in verdict.reason

    # The evaluator thread, and `once status`: a conflict in every minute keeps it in ALARM.
    deadline = time.monotonic() + POLL_S
    last_conflict = time.monotonic()
    output = ""
    while time.monotonic() < deadline:
        if _states(once_cloud)["Conflict"]["StateValue"] == ALARM:
            output = _status(once_cloud, capsys)
            if _row(output, "Orders-Conflict").startswith("Orders-Conflict ALARM"):
                break
        if time.monotonic() - last_conflict > 20:
            _conflict(once_cloud)
            once_cloud.metrics(STACK)
            last_conflict = time.monotonic()
        time.sleep(0.5)
    row = _row(output, "Orders-Conflict")
    assert row.startswith("Orders-Conflict ALARM"), output
    assert "Threshold Crossed" in row
    assert "in ALARM" in output and "alarms (Shop)" in output
    assert _row(output, "Orders-FailedRecords").startswith("Orders-FailedRecords OK"), output
    caption = " ".join(output.split())
    assert "not evaluated locally: Orders-DlqDepth, Orders-FunctionErrors, " in caption
    assert "Orders-FunctionThrottles, Orders-OldestMessageAge" in caption


def _row(output: str, alarm: str) -> str:
    """The table row of ``alarm`` in ``once status``'s output, its cells joined by spaces."""
    for line in output.splitlines():
        cells = [cell.strip() for cell in line.strip("│┃ ").split("│")]
        if cells and cells[0] == alarm:
            return " ".join(cell for cell in cells if cell)
    return ""
