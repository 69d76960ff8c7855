"""moto's server, with each DynamoDB request run alone, transactions rolled back by item,
and a FIFO queue's message groups locked only by the messages really in flight.

Why: moto's TransactWriteItems snapshots every table it touches with ``deepcopy`` and rolls
back by putting the snapshot back. On a server with requests on parallel threads that
fails ("dictionary changed size during iteration", an HTTP 500), and a rollback silently
undoes every write other requests made meanwhile (a poison payment's refused transaction
would erase other payments' ledger credits). The copy also costs time proportional to the
table, so a 3000-payment demo became quadratic.

So, in this process only: DynamoDB requests are serialized (moto's DynamoDB then behaves as
one consistent store; it is still not DynamoDB's atomicity, so concurrency claims are made
on DynamoDB Local only), and a transaction backs up just the items it names and restores
those if it fails. SQS and the other services keep running in parallel.

And SQS: moto locks a FIFO message group while one of its messages is in flight, but it
forgets a message's lock only when a receive reaches that message. Two messages of a group
that come back together (a failed record and the rest of its group after it) then lock
each other, and the later one is delivered first. Here a group is locked by its messages
that are in flight and not yet visible again, as in SQS, so a group's order holds.
"""

from __future__ import annotations

import copy
import sys
import threading
from typing import Any

import moto.dynamodb.models as dynamodb_models
from moto.dynamodb.models import DynamoDBBackend
from moto.dynamodb.models.dynamo_type import DynamoType
from moto.dynamodb.models.table import Table
from moto.dynamodb.responses import DynamoHandler
from moto.server import main
from moto.sqs.models import Queue

_lock = threading.Lock()
_call_action = DynamoHandler.call_action
_transact_write_items = DynamoDBBackend.transact_write_items


def _serialized(self: Any) -> Any:
    with _lock:
        return _call_action(self)


class _CopyTablesByReference:
    """Replaces ``copy`` inside moto.dynamodb.models: a Table is not copied (its touched
    items are backed up instead); everything else is deep-copied as before."""

    def deepcopy(self, value: Any, memo: dict[int, Any] | None = None) -> Any:
        return value if isinstance(value, Table) else copy.deepcopy(value, memo)

    def __getattr__(self, name: str) -> Any:
        return getattr(copy, name)


def _key(table: Table, attributes: dict[str, Any]) -> tuple[DynamoType, DynamoType | None]:
    hash_key = DynamoType(attributes[table.hash_key_attr])
    range_attr = table.range_key_attr
    return hash_key, DynamoType(attributes[range_attr]) if range_attr else None


def _transact_by_item(self: DynamoDBBackend, transact_items: list[dict[str, Any]]) -> None:
    backups: list[tuple[Table, DynamoType, DynamoType | None, Any]] = []
    for entry in transact_items:
        _, operation = next(iter(entry.items()))
        table = self.tables.get(operation.get("TableName"))
        attributes = operation.get("Key") or operation.get("Item") or {}
        if table is None or table.hash_key_attr not in attributes:
            continue
        try:
            hash_key, range_key = _key(table, attributes)
        except KeyError:
            continue
        old = table.get_item(hash_key, range_key)
        backups.append((table, hash_key, range_key, copy.deepcopy(old)))
    try:
        _transact_write_items(self, transact_items)
    except Exception:
        for table, hash_key, range_key, old in reversed(backups):
            if old is None:
                table.delete_item(hash_key, range_key)
            elif range_key is None:
                table.items[hash_key] = old
            else:
                table.items[hash_key][range_key] = old
        raise


def _groups_in_flight(self: Queue) -> set[str]:
    """The message groups with a message received and not yet visible again."""
    return {
        message.group_id
        for message in self.pending_messages
        if message.group_id is not None and not message.visible
    }


DynamoHandler.call_action = _serialized  # type: ignore[method-assign]
DynamoDBBackend.transact_write_items = _transact_by_item  # type: ignore[method-assign]
dynamodb_models.copy = _CopyTablesByReference()  # type: ignore[assignment]
Queue.pending_message_groups = property(_groups_in_flight)  # type: ignore[assignment,method-assign]

if __name__ == "__main__":
    main(sys.argv[1:])
