"""The demo's verdict: read the tables and the DLQ back and check every message's fate.

Why independent of the mapping's own counters: the report must catch what the layer might
get wrong, so it trusts only the stored state. A message is *done* when the mapping deleted
it and the record of its key is COMPLETED; it is *in the DLQ* when the DLQ holds it (under
its own id, or under ``once.original_message_id`` for a quarantined copy); anything else
is *lost*. The ledger is right when every account's balance is the sum of its distinct
valid payments and every payment entry is one of those payments. The notifications are right
when the notifications queue holds, for each of those payments and nothing else, its one
outbox identity (``once.source`` naming its record and one operation of it, ``once.seq`` 0)
with the credit it announces: copies of one identity (a send repeated after a crash before
its outbox was cleared) are counted apart, as a downstream consumer keyed on the identity
sees them: duplicates.
"""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

from rich.console import Console
from rich.table import Table

from once import constants as c
from once import identity
from oncecli.aws import queue_depth, record_id, scan
from proof import example
from proof.demo.workload import Message, Workload
from proof.ledger import read_ledger


def read_queue(sqs: Any, url: str, hold_s: int = 30) -> list[dict[str, Any]]:
    """Every message of a queue, without consuming it: each is received once (hidden for
    ``hold_s``), then made visible again."""
    seen: dict[str, dict[str, Any]] = {}
    while True:
        batch = sqs.receive_message(
            QueueUrl=url,
            MaxNumberOfMessages=10,
            WaitTimeSeconds=0,
            VisibilityTimeout=hold_s,
            MessageAttributeNames=["All"],
            MessageSystemAttributeNames=["All"],
        ).get("Messages", [])
        fresh = [m for m in batch if m["MessageId"] not in seen]
        if not fresh:
            break
        for message in fresh:
            seen[message["MessageId"]] = message
    entries = [
        {"Id": str(n), "ReceiptHandle": m["ReceiptHandle"], "VisibilityTimeout": 0}
        for n, m in enumerate(seen.values())
    ]
    for start in range(0, len(entries), 10):
        sqs.change_message_visibility_batch(QueueUrl=url, Entries=entries[start : start + 10])
    return list(seen.values())


def dlq_origin(message: dict[str, Any]) -> tuple[str, str]:
    """(original message id, why it is here) of a DLQ message."""
    attributes = message.get("MessageAttributes") or {}
    original = attributes.get(c.QUARANTINE_ATTR_MESSAGE_ID, {}).get("StringValue")
    if original:
        reason = attributes.get(c.QUARANTINE_ATTR_REASON, {}).get("StringValue", "quarantined")
        return original, f"quarantined: {reason}"
    return message["MessageId"], "maxReceiveCount exceeded"


def check(
    *,
    workload: Workload,
    sent: dict[str, Message],
    deleted: set[str],
    ddb: Any,
    sqs: Any,
    outputs: dict[str, str],
    prefix: str,
    fifo: bool = False,
) -> dict[str, Any]:
    """Compare the stored state with the workload; the dict is the ``--json`` report.

    On a FIFO queue, ``order_ok`` also says whether each account's payments took effect in
    the order they were sent (None on a standard queue, which promises no order)."""
    records = {item[c.ATTR_ID]["S"]: item for item in scan(ddb, outputs["IdempotencyTableName"])}
    ledger = read_ledger(ddb, outputs["LedgerTableName"])
    notified = read_notifications(sqs, outputs["NotificationsQueueUrl"])
    entries, balances = ledger.entries, ledger.balances
    dlq = [dlq_origin(m) for m in read_queue(sqs, outputs["DlqUrl"])]
    in_dlq = {original for original, _ in dlq}

    def done(message_id: str, message: Message) -> bool:
        if message_id not in deleted or message.payment_id is None:
            return False
        record = records.get(record_id(prefix, message.payment_id))
        return record is not None and record[c.ATTR_STATUS]["S"] == c.STATUS_COMPLETED

    fates: Counter[str] = Counter()
    lost_ids = []
    for message_id, message in sent.items():
        if message_id in in_dlq:
            fates["dlq"] += 1
        elif done(message_id, message):
            fates["done"] += 1
        else:
            lost_ids.append(message_id)
    expected: dict[str, int] = Counter()
    for account, amount in workload.payments.values():
        expected[account] += amount
    ledger_ok = (
        entries == workload.payments
        and all(balances.get(a, 0) == v for a, v in expected.items())
        and set(balances) <= set(expected)
    )
    return {
        "sent": len(sent),
        "unique_keys": len(workload.payments),
        "executions": len(entries),
        "acknowledged": len(deleted & set(sent)),
        "done": fates["done"],
        "dlq": len(dlq),
        "lost": len(lost_ids),
        "lost_message_ids": lost_ids[:20],
        "ledger_ok": ledger_ok,
        "workload": dict(sorted(workload.kinds.items())),
        "dlq_reasons": dict(sorted(Counter(reason for _, reason in dlq).items())),
        "records_by_status": dict(
            sorted(Counter(r[c.ATTR_STATUS]["S"] for r in records.values()).items())
        ),
        "source_queue_left": queue_depth(sqs, outputs["QueueUrl"]).total,
        "accounts": len(balances),
        "order_ok": out_of_order(workload, sent, records, prefix) == 0 if fifo else None,
        "notifications": sum(len(bodies) for bodies in notified.values()),
        "notifications_resent": sum(len(bodies) - 1 for bodies in notified.values()),
        "notifications_ok": notified_once(workload, notified, prefix),
    }


def read_notifications(sqs: Any, url: str) -> dict[tuple[str, int], list[Any]]:
    """(once.source, once.seq) -> the bodies of every message of the notifications queue
    with that outbox identity (("", -1) for a message without one)."""
    found: dict[tuple[str, int], list[Any]] = {}
    for message in read_queue(sqs, url):
        attributes = message.get("MessageAttributes") or {}
        source = attributes.get(c.OUTBOX_ATTR_SOURCE, {}).get("StringValue", "")
        seq = int(attributes.get(c.OUTBOX_ATTR_SEQ, {}).get("StringValue", -1))
        try:
            body = json.loads(message["Body"])
        except ValueError:
            body = message["Body"]
        found.setdefault((source, seq), []).append(body)
    return found


def notified_once(
    workload: Workload, notified: dict[tuple[str, int], list[Any]], prefix: str
) -> bool:
    """Each valid payment announced under its own identity, with its own credit, and no
    other identity in the queue."""
    example.require()
    from payments import STATUS_CREDITED

    expected = {
        (identity.escape(record_id(prefix, pid)), 0): {
            "paymentId": pid,
            "account": account,
            "amount": amount,
            "status": STATUS_CREDITED,
        }
        for pid, (account, amount) in workload.payments.items()
    }
    # One operation per payment: each record named by one identity, and only those.
    by_name = {(identity.named(source), seq): bodies for (source, seq), bodies in notified.items()}
    return (
        len(by_name) == len(notified)
        and set(by_name) == set(expected)
        and all(body == expected[named] for named, bodies in by_name.items() for body in bodies)
    )


def out_of_order(
    workload: Workload, sent: dict[str, Message], records: dict[str, Any], prefix: str
) -> int:
    """Payments that completed before a payment of their account sent ahead of them.

    A record's ``updated_at`` is when it completed, which follows the ledger's credit: in a
    FIFO message group, the order in which the credits took effect."""
    last: dict[str, int] = {}
    late = 0
    for message in sent.values():  # in the order sent
        if message.kind != "payment" or message.payment_id not in workload.payments:
            continue
        record = records.get(record_id(prefix, message.payment_id))
        if record is None or record[c.ATTR_STATUS]["S"] != c.STATUS_COMPLETED:
            continue  # not done: counted as lost, if it is
        account, _ = workload.payments[message.payment_id]
        completed = int(record[c.ATTR_UPDATED_AT]["N"])
        if completed < last.get(account, 0):
            late += 1
        last[account] = max(completed, last.get(account, 0))
    return late


def render(report: dict[str, Any], console: Console) -> None:
    """The report table the demo prints."""
    ok = (
        report["lost"] == 0
        and report["ledger_ok"]
        and report.get("notifications_ok") is not False
        and report.get("order_ok") is not False
    )
    table = Table(
        title="make demo: " + ("every message took effect once" if ok else "SOMETHING WENT WRONG"),
        title_justify="left",
    )
    table.add_column("measure")
    table.add_column("value", justify="right")
    table.add_column("meaning")
    good, bad = "[green]", "[bold red]"
    rows = [
        ("sent", report["sent"], "messages sent (duplicates and bad ones included)"),
        ("unique_keys", report["unique_keys"], "distinct valid payments"),
        (
            "executions",
            (good if report["executions"] == report["unique_keys"] else bad)
            + str(report["executions"]),
            "payments applied to the ledger",
        ),
        ("acknowledged", report["acknowledged"], "messages deleted by the mapping"),
        (
            "dlq",
            report["dlq"],
            ", ".join(f"{v} {k}" for k, v in report["dlq_reasons"].items()) or "-",
        ),
        (
            "lost",
            (good if report["lost"] == 0 else bad) + str(report["lost"]),
            "neither done nor in the DLQ",
        ),
        (
            "ledger_ok",
            (good if report["ledger_ok"] else bad) + str(report["ledger_ok"]).lower(),
            f"{report['accounts']} balances = sums of distinct valid payments",
        ),
        (
            "notifications_ok",
            (good if report["notifications_ok"] else bad) + str(report["notifications_ok"]).lower(),
            f"{report['notifications']} notifications: each credited payment announced under "
            f"its own outbox identity ({report['notifications_resent']} resent copies)",
        ),
        (
            "records",
            sum(report["records_by_status"].values()),
            ", ".join(f"{v} {k}" for k, v in report["records_by_status"].items()),
        ),
    ]
    mapping = report.get("mapping") or {}
    if mapping:
        rows.append(
            (
                "invocations",
                mapping["invocations"],
                f"{mapping['records']} records delivered, {mapping['retried']} left for "
                f"redelivery, {mapping['full_failures']} full-batch failures, "
                f"{mapping['timeouts']} timeouts",
            )
        )
    if "wall_s" in report:
        rows.append(
            (
                "wall time",
                f"{report['wall_s']:.1f} s",
                f"engine {report['engine']}, {report['workers']} workers",
            )
        )
    if report.get("order_ok") is not None:
        rows.append(
            (
                "order_ok",
                (good if report["order_ok"] else bad) + str(report["order_ok"]).lower(),
                "each account's payments took effect in the order sent (FIFO)",
            )
        )
    for name, value, meaning in rows:
        table.add_row(name, str(value), meaning)
    console.print(table)
    console.print("workload: " + ", ".join(f"{v} {k}" for k, v in report["workload"].items()))


def write_json(report: dict[str, Any], path: str) -> None:
    with open(path, "w") as out:
        json.dump(report, out, indent=2, sort_keys=True)
        out.write("\n")
