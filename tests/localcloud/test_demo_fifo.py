"""``make demo`` on the stack's FIFO variant (``ARGS=--fifo``): each account's payments take
effect in the order sent."""

from __future__ import annotations

from tests.localcloud.demo_run import check, demo


def test_demo_fifo_on_moto_applies_each_accounts_payments_in_order(tmp_path):
    report = demo(tmp_path, "--fifo")
    check(report)
    assert report["order_ok"] is True
