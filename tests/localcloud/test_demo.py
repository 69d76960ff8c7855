"""``make demo`` end to end on moto, as the README runs it (``demo_run``), and the verdict's
own checks of order and notifications."""

from __future__ import annotations

from proof.demo.verdict import notified_once, out_of_order
from proof.demo.workload import Message, Workload
from tests.localcloud.demo_run import check, demo


def test_demo_on_moto(tmp_path):
    check(demo(tmp_path))


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
