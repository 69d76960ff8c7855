"""once.testing as a team gets it: ``pip install`` of the package registers the plugin, and a
test file in the team's own folder uses ``once_env`` with nothing copied from this project.

The team's tests run in a pytest subprocess, in a temporary folder outside the project, with
an environment holding no AWS or once variables. They also show that the kit can fail: a
handler that carries nothing downstream ships an order twice across a crash after its
effect, and the test written with the plugin catches it. The team's conftest names its
service after pytest has loaded the plugin, and the handler's records, logs and metrics
follow it.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import xml.etree.ElementTree as ET
from pathlib import Path

TEAM_TESTS = textwrap.dedent(
    '''
    """A team's tests, in its own repository."""
    import json
    import sys

    from once import make_handler

    ORDER = {"orderId": "o-1", "qty": 1}


    class Warehouse:
        """The downstream system: ships what it is asked to, once per idempotency key."""

        def __init__(self):
            self.shipments = []

        def ship(self, order_id, idempotency_key=None):
            if idempotency_key is not None and idempotency_key in [k for _, k in self.shipments]:
                return
            self.shipments.append((order_id, idempotency_key))


    def careless(warehouse):
        def ship(body, attempt):
            warehouse.ship(body["orderId"])
            return {"shipped": body["orderId"]}

        return ship


    def careful(warehouse):
        def ship(body, attempt):
            warehouse.ship(body["orderId"], idempotency_key=attempt.key)
            return {"shipped": body["orderId"]}

        return ship


    def crash_after_the_effect_then_take_over(once_env, process):
        handler = make_handler(process, key="orderId")
        once_env.deliver(handler, [ORDER], crash="after_process")
        once_env.expire_leases()
        assert once_env.deliver(handler, [ORDER]).outcomes == ["processed"]


    def test_careless_ships_once_across_a_crash(once_env):
        warehouse = Warehouse()
        crash_after_the_effect_then_take_over(once_env, careless(warehouse))
        assert len(warehouse.shipments) == 1


    def test_careful_ships_once_across_a_crash(once_env):
        warehouse = Warehouse()
        crash_after_the_effect_then_take_over(once_env, careful(warehouse))
        assert len(warehouse.shipments) == 1


    def test_duplicates_are_not_run_again(once_env):
        warehouse = Warehouse()
        handler = make_handler(careful(warehouse), key="orderId")
        assert once_env.deliver(handler, [ORDER, ORDER]).outcomes == ["processed", "duplicate"]
        assert once_env.record("o-1").status == "COMPLETED"


    def test_nothing_of_the_once_project_is_loaded():
        assert not [m for m in sys.modules if m == "tests" or m.startswith("tests.")]


    def test_the_service_set_by_the_conftest_names_records_logs_and_metrics(once_env, capsys):
        from conftest import LOADED_AT_STARTUP

        assert LOADED_AT_STARTUP == []  # the plugin loaded before the conftest, cheaply
        handler = make_handler(careful(Warehouse()), key="orderId")
        capsys.readouterr()
        once_env.deliver(handler, [ORDER])
        printed = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
        assert once_env.record("o-1").id == "orders#o-1"
        assert {line["service"] for line in printed} == {"orders"}
        [metrics] = [line for line in printed if "_aws" in line]
        assert metrics["_aws"]["CloudWatchMetrics"][0]["Namespace"] == "Shop"
    '''
)

TEAM_CONFTEST = textwrap.dedent(
    """
    import os
    import sys

    #: What pytest had imported of boto3 and Powertools when it reached this conftest.
    LOADED_AT_STARTUP = sorted(
        m for m in sys.modules if m.split(".")[0] in ("boto3", "aws_lambda_powertools")
    )
    os.environ["POWERTOOLS_SERVICE_NAME"] = "orders"
    os.environ["POWERTOOLS_METRICS_NAMESPACE"] = "Shop"
    """
)

#: What the project's own conftest sets; the team's run starts without any of it.
_PROJECT_ENV = ("AWS_", "POWERTOOLS_", "IDEMPOTENCY_", "DLQ_", "LEDGER_", "RECORD_", "PYTHON")


def test_a_team_test_outside_the_project_uses_once_env_and_catches_a_careless_handler(
    tmp_path: Path,
) -> None:
    (tmp_path / "test_orders.py").write_text(TEAM_TESTS)
    (tmp_path / "conftest.py").write_text(TEAM_CONFTEST)
    report = tmp_path / "report.xml"
    env = {k: v for k, v in os.environ.items() if not k.startswith(_PROJECT_ENV)}

    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", f"--junitxml={report}"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )

    assert "plugins:" in run.stdout and "once-" in run.stdout, run.stdout[-3000:]
    cases = {case.get("name"): case for case in ET.parse(report).getroot().iter("testcase")}
    assert set(cases) == {
        "test_careless_ships_once_across_a_crash",
        "test_careful_ships_once_across_a_crash",
        "test_duplicates_are_not_run_again",
        "test_nothing_of_the_once_project_is_loaded",
        "test_the_service_set_by_the_conftest_names_records_logs_and_metrics",
    }
    failed = {n for n, case in cases.items() if case.find("failure") is not None}
    assert failed == {"test_careless_ships_once_across_a_crash"}, run.stdout[-3000:]
    failure = cases["test_careless_ships_once_across_a_crash"].find("failure")
    assert failure is not None
    assert "assert 2 == 1" in (failure.get("message") or "")
    assert run.returncode == 1
