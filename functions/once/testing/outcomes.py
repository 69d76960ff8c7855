"""Each record's outcome, read from the line the runtime logs for it.

The batch response only says which records SQS must redeliver; it cannot tell a
``processed`` from a ``duplicate``. The runtime logs one line per record with its
``message_id`` and ``outcome`` (the same line operators search in CloudWatch), so the kit
reads that, and needs no hook in the runtime that exists only for tests.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from types import TracebackType

from once.models import Outcome
from once.observability import logger as runtime_logger


class OutcomeLog(logging.Handler):
    """Collects the outcome of the given messages while an invocation runs.

    INFO is enabled on the runtime's logger for that time if a test turned it off, since
    the outcome line is logged at INFO.
    """

    def __init__(self, message_ids: Iterable[str]) -> None:
        super().__init__(logging.INFO)
        self._ids = set(message_ids)
        self.outcomes: dict[str, Outcome] = {}
        self._logger = logging.getLogger(runtime_logger.name)
        self._level = self._logger.level

    def emit(self, record: logging.LogRecord) -> None:
        message_id = getattr(record, "message_id", None)
        outcome = getattr(record, "outcome", None)
        if message_id in self._ids and outcome is not None:
            self.outcomes[message_id] = Outcome(outcome)

    def __enter__(self) -> OutcomeLog:
        self._level = self._logger.level
        if not self._logger.isEnabledFor(logging.INFO):
            self._logger.setLevel(logging.INFO)
        self._logger.addHandler(self)
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        self._logger.removeHandler(self)
        self._logger.setLevel(self._level)
