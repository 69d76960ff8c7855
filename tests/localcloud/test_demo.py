"""``make demo`` end to end, as the README runs it: a subprocess, its exit code, its report."""

from __future__ import annotations

import json
import subprocess
import sys
import time

import pytest

from oncecli.project import ROOT
from proof.demo.verdict import notified_once, out_of_order
from proof.demo.workload import Message, Workload
from tests.localcloud.helpers import CONTEXT

ARGS = [
    "--messages",
    "40",
    "--bad-rate",
    "0.1",
    "--duplicate-rate",
    "0.25",
    *[f"-c{k}={v}" for k, v in CONTEXT.items()],
]


def demo(tmp_path, *extra: str) -> dict:
    out = tmp_path / "report.json"
    began = time.monotonic()
    run = subprocess.run(
        [sys.executable, "-m", "proof.demo", *ARGS, *extra, "--json", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    report = json.loads(out.read_text())
    report["test_wall_s"] = time.monotonic() - began
    assert "every message took effect once" in run.stdout
    return report


def check(report: dict) -> None:
    assert report["sent"] == 40
    assert report["lost"] == 0
    assert report["ledger_ok"] is True
    assert report["executions"] == report["unique_keys"]
    assert report["notifications_ok"] is True  # each credited payment announced, by identity
    assert report["notifications"] - report["notifications_resent"] == report["unique_keys"]
    assert report["dlq"] >= 3  # malformed, mismatch, poison at least
    assert report["dlq_reasons"].get("maxReceiveCount exceeded", 0) >= 1  # the poison
    assert report["acknowledged"] + report["dlq_reasons"]["maxReceiveCount exceeded"] == 40


# Each demo is a process of its own with its own local cloud: they run side by side.
@pytest.mark.xdist_group("demo-moto")
def test_demo_on_moto(tmp_path):
    check(demo(tmp_path))


@pytest.mark.xdist_group("demo-dynamodb-local")
@pytest.mark.dynamodb_local
def test_demo_on_dynamodb_local(tmp_path):
    """The CLI enters a private network namespace itself; if unshare is not permitted here,
    this fails (exit code 7) with the CLI's message: it never skips."""
    report = demo(tmp_path, "--engine", "dynamodb-local")
    check(report)
    assert report["engine"] == "dynamodb-local"


@pytest.mark.xdist_group("demo-fifo")
def test_demo_fifo_on_moto_applies_each_accounts_payments_in_order(tmp_path):
    report = demo(tmp_path, "--fifo")
    check(report)
    assert report["order_ok"] is True


def test_a_payment_completed_before_one_sent_ahead_of_it_is_out_of_order():
    plan = Workload(groups=[], late=[], payments={"p1": ("a", 1), "p2": ("a", 2), "q": ("b", 3)})
    sent = {f"m{n}": Message("payment", "{}", pid) for n, pid in enumerate(("p1", "q", "p2"))}

    def records(**completed_at: int) -> dict:
        return {
            f"payments#{pid}": {"status": {"S": "COMPLETED"}, "updated_at": {"N": str(at)}}
            for pid, at in completed_at.items()
        }

    assert out_of_order(plan, sent, records(p1=10, p2=20, q=5), "payments") == 0
    assert out_of_order(plan, sent, records(p1=20, p2=10, q=30), "payments") == 1


def test_notifications_are_right_when_each_payment_has_its_one_identity_and_its_credit():
    plan = Workload(groups=[], late=[], payments={"p1": ("a", 1), "p2": ("b", 2)})

    def body(pid: str, account: str, amount: int) -> dict:
        return {"paymentId": pid, "account": account, "amount": amount, "status": "credited"}

    one = {("payments#p1", 0): [body("p1", "a", 1)], ("payments#p2", 0): [body("p2", "b", 2)]}
    assert notified_once(plan, one, "payments")
    resent = {**one, ("payments#p1", 0): [body("p1", "a", 1)] * 2}
    assert notified_once(plan, resent, "payments")  # a resend keeps its identity
    assert not notified_once(plan, {("payments#p1", 0): one[("payments#p1", 0)]}, "payments")
    wrong = {**one, ("payments#p2", 0): [body("p2", "b", 3)]}
    assert not notified_once(plan, wrong, "payments")
    stray = {**one, ("", -1): ["not from the outbox"]}
    assert not notified_once(plan, stray, "payments")
