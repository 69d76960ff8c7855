"""The SQS records of Lambda's event, as once reads them: the fields of Powertools'
``SQSRecord`` that the processor and the backoff read, under the same names and read the same
way (``tests/unit/runtime/test_cold_start_imports.py`` compares them on a standard and a
FIFO record).

Why not Powertools' class: it comes with its package of event classes, whose ``__init__``
imports every one of them (some 30 modules, about 10 ms of a cold start) for the one once
reads. Business code that wants Powertools' types still gets them from its own imports.
"""

from __future__ import annotations

from typing import Any


class SqsRecord:
    """One record of Lambda's SQS event (``raw_event``: the record as Lambda gave it)."""

    __slots__ = ("raw_event",)

    def __init__(self, raw_event: dict[str, Any]) -> None:
        self.raw_event = raw_event

    @property
    def message_id(self) -> str:
        value: str = self.raw_event["messageId"]
        return value

    @property
    def receipt_handle(self) -> str:
        value: str = self.raw_event["receiptHandle"]
        return value

    @property
    def body(self) -> str:
        value: str = self.raw_event["body"]
        return value

    @property
    def event_source_arn(self) -> str:
        value: str = self.raw_event["eventSourceARN"]
        return value

    @property
    def attributes(self) -> SqsAttributes:
        return SqsAttributes(self.raw_event["attributes"])


class SqsAttributes:
    """A record's ``attributes``, as Powertools' ``SQSRecordAttributes`` reads them."""

    __slots__ = ("_attributes",)

    def __init__(self, attributes: dict[str, Any]) -> None:
        self._attributes = attributes

    def get(self, name: str, default: Any = None) -> Any:
        return self._attributes.get(name, default)

    @property
    def message_group_id(self) -> str | None:
        group: str | None = self._attributes.get("MessageGroupId")
        return group
