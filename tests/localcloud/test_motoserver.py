"""The patched moto server: a refused transaction undoes only its own items, and a FIFO
group's order survives a message that becomes visible again during a receive."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from botocore.exceptions import ClientError

from oncecli.aws import local_client
from oncecli.localcloud.engines import MotoServer


def _add_seven(key: str) -> dict:
    """A transaction item that adds 7 to the balance of ``key``."""
    return {
        "Update": {
            "TableName": "t",
            "Key": {"id": {"S": key}},
            "UpdateExpression": "ADD balance :a",
            "ExpressionAttributeValues": {":a": {"N": "7"}},
        }
    }


def test_failed_transaction_rolls_back_its_items_only():
    with MotoServer() as moto:
        ddb = local_client("dynamodb", moto.endpoint)
        ddb.create_table(
            TableName="t",
            BillingMode="PAY_PER_REQUEST",
            KeySchema=[{"AttributeName": "id", "KeyType": "HASH"}],
            AttributeDefinitions=[{"AttributeName": "id", "AttributeType": "S"}],
        )
        ddb.put_item(TableName="t", Item={"id": {"S": "other"}, "n": {"N": "1"}})
        ddb.put_item(TableName="t", Item={"id": {"S": "acct"}, "balance": {"N": "5"}})
        with pytest.raises(ClientError):
            ddb.transact_write_items(
                TransactItems=[
                    _add_seven("acct"),
                    {"Put": {"TableName": "t", "Item": {"id": {"S": "new"}}}},
                    _add_seven("x" * 2100),  # key too long: the transaction is refused
                ]
            )
        items = {i["id"]["S"]: i for i in ddb.scan(TableName="t")["Items"]}
        assert set(items) == {"other", "acct"}
        assert items["acct"]["balance"]["N"] == "5"
        ddb.transact_write_items(
            TransactItems=[
                _add_seven("acct"),
                {
                    "Put": {
                        "TableName": "t",
                        "Item": {"id": {"S": "new"}},
                        "ConditionExpression": "attribute_not_exists(id)",
                    }
                },
            ]
        )
        items = {i["id"]["S"]: i for i in ddb.scan(TableName="t")["Items"]}
        assert items["acct"]["balance"]["N"] == "12" and "new" in items


#: Run in a child process: importing the patched server patches moto for the whole process.
_RACE = """
import json, time
import moto.core.utils as utils
from moto.sqs.models import Queue, sqs_backends
import oncecli.localcloud.motoserver  # noqa: F401  (the patches)

now = [time.time()]
utils.unix_time = lambda dt=None: now[0] if dt is None else utils.unix_time_orig(dt)
backend = sqs_backends["123456789012"]["us-east-1"]
queue = backend.create_queue("g.fifo", FifoQueue="true", VisibilityTimeout="5")
for i in range(2):
    backend.send_message("g.fifo", f"m{i}", group_id="g", deduplication_id=f"d{i}")
backend.receive_message("g.fifo", 10, 0, 5)
m0, m1 = queue._messages
m0.visible_at = now[0] * 1000 + 3000  # the failed record: back after 3 s
m1.visible_at = now[0] * 1000 + 1000  # the rest of its group: back after 1 s
now[0] += 2
walk = Queue.messages.fget

def messages_then_tick(self):
    found = walk(self)
    now[0] += 2  # m0 becomes visible while the receive walks the messages it found
    return found

Queue.messages = property(messages_then_tick)
during = [m.body for m in backend.receive_message("g.fifo", 10, 0, 5)]
Queue.messages = property(walk)
after = [m.body for m in backend.receive_message("g.fifo", 10, 0, 5)]
print(json.dumps([during, after]))
"""


def test_a_fifo_message_visible_again_mid_receive_is_not_overtaken_by_its_group():
    """moto judged each message at its own reading of the clock: the receive that walked
    past m0 (not yet visible) then found m0's group unlocked and handed out m1 first."""
    script = _RACE.replace("utils.unix_time_orig(dt)", "(dt.timestamp())")
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True, timeout=120
    )
    during, after = json.loads(done.stdout.strip().splitlines()[-1])
    assert during == []
    assert after == ["m0", "m1"]


#: Run in a child process, as _RACE: a delete lands while a receive walks the messages.
_DELETE_MID_WALK = """
import json, threading
from moto.sqs.models import Queue, sqs_backends
import oncecli.localcloud.motoserver  # noqa: F401  (the patches)

backend = sqs_backends["123456789012"]["us-east-1"]
queue = backend.create_queue("g.fifo", FifoQueue="true", VisibilityTimeout="30")
for body, group in (("a0", "a"), ("a1", "a"), ("b0", "b"), ("a2", "a")):
    backend.send_message("g.fifo", body, group_id=group, deduplication_id=body)
(a0,) = backend.receive_message("g.fifo", 1, 0, 30)  # in flight: group a is locked
(b0,) = backend.receive_message("g.fifo", 1, 0, 30)
next(m for m in queue._messages if m.body == "b0").visible_at = 0  # b0 is back
walk = Queue.messages.fget
deleter = threading.Thread(target=backend.delete_message, args=("g.fifo", a0.receipt_handle))

def messages_then_delete(self):
    found = walk(self)
    if deleter.ident is None:  # the first walk only
        deleter.start()
        deleter.join(timeout=0.5)  # a delete that does not wait for the walk lands now
    return found

Queue.messages = property(messages_then_delete)
during = [m.body for m in backend.receive_message("g.fifo", 10, 0, 30)]
Queue.messages = property(walk)
deleter.join()
after = [m.body for m in backend.receive_message("g.fifo", 10, 0, 30)]
print(json.dumps([during, after]))
"""


def test_a_delete_during_a_fifo_receive_does_not_let_a_later_message_of_its_group_overtake():
    """moto walked past a1 (group a locked by a0 in flight); a0's delete landed mid-walk;
    b0, back from its visibility timeout, made the walk look at the locks again, and a2
    went out before a1. The patched receive holds the queue's lock; the delete waits."""
    done = subprocess.run(
        [sys.executable, "-c", _DELETE_MID_WALK],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    during, after = json.loads(done.stdout.strip().splitlines()[-1])
    assert during == ["b0"]
    assert after == ["a1", "a2"]
