"""What an ``OnceConsumer`` derives from its arguments, and the rules that refuse bad ones.

Plain numbers, no CDK: every value that must not be typed by hand (the visibility timeout,
``maxReceiveCount``, the retentions, the alarm thresholds) is computed here and tested row by
row, and a setting that breaks a rule raises ``ConfigurationError`` at synth, naming the
setting, the rule and what to do. The retry backoff's defaults come from ``once.constants``
and its formula from ``once.backoff``, the modules the runtime reads them from.
"""

from __future__ import annotations

import dataclasses
import re
from typing import Final

from once import constants as c
from once.backoff import Backoff

#: SQS hides a message for at least this many function timeouts (AWS's guidance for Lambda
#: consumers), plus the batching window, so that a slow batch is never redelivered while it
#: still runs.
VISIBILITY_TIMEOUT_FACTOR: Final = 6
#: Fewer receives send a message to the DLQ after too few attempts.
MIN_MAX_RECEIVE_COUNT: Final = 5
#: The retry window (the sum of the backoffs) is at least this many visibility timeouts, so
#: that retry backoff never sends a message to the DLQ sooner than 5 plain redeliveries would.
RETRY_WINDOW_VISIBILITY_TIMEOUTS: Final = 5
#: SQS's upper bound on maxReceiveCount.
SQS_MAX_RECEIVE_COUNT: Final = 1000
#: Lambda's bounds on an SQS event source mapping and on a function.
MIN_MAX_CONCURRENCY: Final = 2
MAX_MAX_CONCURRENCY: Final = 1000
FIFO_MAX_BATCH_SIZE: Final = 10
STANDARD_MAX_BATCH_SIZE: Final = 10_000
#: A standard queue's batch above this size needs a batching window of at least 1 s.
BATCH_SIZE_WITHOUT_WINDOW: Final = 10
MAX_BATCHING_WINDOW_S: Final = 300
MAX_TIMEOUT_S: Final = 900
MIN_MEMORY_MB: Final = 128
MAX_MEMORY_MB: Final = 10_240
#: The service name prefixes every record key and names the metrics: short and plain.
SERVICE_NAME_PATTERN: Final = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
#: Environment variables the construct sets itself; ``environment=`` may not override them.
RESERVED_ENVIRONMENT: Final = (
    c.ENV_TABLE_NAME,
    c.ENV_DLQ_URL,
    c.ENV_SERVICE_NAME,
    c.ENV_RETENTION_S,
)


class ConfigurationError(ValueError):
    """An ``OnceConsumer`` setting breaks a rule of the protocol or of AWS."""


def backoff_s(
    receive_count: int,
    base_s: int = c.DEFAULT_BACKOFF_BASE_S,
    max_s: int = c.DEFAULT_BACKOFF_MAX_S,
) -> int:
    """How long the runtime hides a record after its n-th receive failed: its own
    ``Backoff.delay_s``, d(n) = min(max, base * 2**(n-1))."""
    return Backoff(base_s, max_s).delay_s(receive_count)


def retry_window_s(receives: int) -> int:
    """The sum of the backoffs over ``receives`` receives: how long retries last before the
    message moves to the DLQ, when every receive fails at once."""
    return sum(backoff_s(n) for n in range(1, receives + 1))


def derived_max_receive_count(visibility_timeout_s: int) -> int:
    """The fewest receives (at least 5) whose retry window covers 5 visibility timeouts."""
    needed = RETRY_WINDOW_VISIBILITY_TIMEOUTS * visibility_timeout_s
    receives = MIN_MAX_RECEIVE_COUNT
    while retry_window_s(receives) < needed:
        receives += 1
    return receives


@dataclasses.dataclass(frozen=True)
class ConsumerSettings:
    """The arguments of an ``OnceConsumer`` in plain numbers; derived values are properties.

    Construction checks every rule and raises one ``ConfigurationError`` listing each
    setting that breaks one.
    """

    service_name: str
    fifo: bool
    timeout_s: float
    memory_mb: int
    batch_size: int
    batching_window_s: float
    max_concurrency: int | None
    reserved_concurrency: int | None
    max_receive_count: int | None
    environment: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        problems = self.problems()
        if problems:
            raise ConfigurationError(
                "OnceConsumer settings refused:\n" + "\n".join(f"- {p}" for p in problems)
            )

    def problems(self) -> list[str]:
        """Every broken rule, each as: the setting, its value, the rule and why."""
        found: list[str] = []
        if not SERVICE_NAME_PATTERN.fullmatch(self.service_name):
            found.append(
                f"service_name={self.service_name!r}: use 1 to 64 letters, digits, '.', '_' or "
                "'-', starting with a letter or digit; it prefixes every record key, so keep it "
                "stable once deployed"
            )
        if not (1 <= self.timeout_s <= MAX_TIMEOUT_S) or self.timeout_s != int(self.timeout_s):
            found.append(
                f"timeout={self.timeout_s} s: Lambda accepts whole seconds from 1 to "
                f"{MAX_TIMEOUT_S}"
            )
        if not MIN_MEMORY_MB <= self.memory_mb <= MAX_MEMORY_MB:
            found.append(
                f"memory_size={self.memory_mb}: Lambda accepts {MIN_MEMORY_MB} to "
                f"{MAX_MEMORY_MB} MB"
            )
        found += self._batching_problems()
        found += self._concurrency_problems()
        if self.max_receive_count is not None and not (
            MIN_MAX_RECEIVE_COUNT <= self.max_receive_count <= SQS_MAX_RECEIVE_COUNT
        ):
            found.append(
                f"max_receive_count={self.max_receive_count}: must be from "
                f"{MIN_MAX_RECEIVE_COUNT} to {SQS_MAX_RECEIVE_COUNT}; fewer receives send a "
                "message to the DLQ after too few attempts (None derives it from the timeout)"
            )
        reserved = sorted(set(self.environment) & set(RESERVED_ENVIRONMENT))
        if reserved:
            found.append(
                f"environment sets {', '.join(reserved)}: OnceConsumer sets these itself from "
                "its own resources and arguments"
            )
        if not found:
            found += self._retention_problems()
        return found

    def _batching_problems(self) -> list[str]:
        found: list[str] = []
        limit = FIFO_MAX_BATCH_SIZE if self.fifo else STANDARD_MAX_BATCH_SIZE
        if not 1 <= self.batch_size <= limit:
            kind = "a FIFO queue" if self.fifo else "a standard queue"
            found.append(f"batch_size={self.batch_size}: {kind} takes 1 to {limit}")
        if not 0 <= self.batching_window_s <= MAX_BATCHING_WINDOW_S or (
            self.batching_window_s != int(self.batching_window_s)
        ):
            found.append(
                f"max_batching_window={self.batching_window_s} s: Lambda accepts whole "
                f"seconds from 0 to {MAX_BATCHING_WINDOW_S}"
            )
        if self.fifo and self.batching_window_s:
            found.append(
                f"max_batching_window={self.batching_window_s} s on a FIFO queue: Lambda "
                "supports no batching window for FIFO sources; leave it at 0"
            )
        if (
            not self.fifo
            and self.batch_size > BATCH_SIZE_WITHOUT_WINDOW
            and self.batching_window_s < 1
        ):
            found.append(
                f"batch_size={self.batch_size} without a batching window: Lambda needs "
                f"max_batching_window of at least 1 s above {BATCH_SIZE_WITHOUT_WINDOW} records"
            )
        return found

    def _concurrency_problems(self) -> list[str]:
        found: list[str] = []
        maximum, reserved = self.max_concurrency, self.reserved_concurrency
        if maximum is not None and not MIN_MAX_CONCURRENCY <= maximum <= MAX_MAX_CONCURRENCY:
            found.append(
                f"max_concurrency={maximum}: an SQS event source mapping takes "
                f"{MIN_MAX_CONCURRENCY} to {MAX_MAX_CONCURRENCY}"
            )
        if reserved is not None and maximum is None:
            found.append(
                f"reserved_concurrency={reserved} without max_concurrency: the mapping would "
                "scale past the reservation and be throttled; set max_concurrency to at most "
                f"{reserved}"
            )
        elif reserved is not None and maximum is not None and reserved < maximum:
            found.append(
                f"reserved_concurrency={reserved} is below max_concurrency={maximum}: the "
                "mapping's pollers would be throttled; reserve at least max_concurrency"
            )
        return found

    def _retention_problems(self) -> list[str]:
        worst_case_s = self.receive_count * self.visibility_timeout_s
        if worst_case_s < self.source_retention_s:
            return []
        fits = (self.source_retention_s - 1) // self.visibility_timeout_s
        given = "max_receive_count" if self.max_receive_count else "the derived maxReceiveCount"
        return [
            f"{given} {self.receive_count} x visibility timeout {self.visibility_timeout_s} s "
            f"= {worst_case_s} s is not shorter than the source queue's retention "
            f"({self.source_retention_s} s): when whole batches fail, each retry waits a full "
            "visibility timeout and messages would expire before reaching the DLQ; shorten "
            f"the timeout or pass max_receive_count from {MIN_MAX_RECEIVE_COUNT} to {fits}"
        ]

    @property
    def visibility_timeout_s(self) -> int:
        """6 x the function timeout + the batching window."""
        return int(VISIBILITY_TIMEOUT_FACTOR * self.timeout_s + self.batching_window_s)

    @property
    def receive_count(self) -> int:
        """maxReceiveCount: as given, or derived so the retry window covers 5 visibility
        timeouts."""
        if self.max_receive_count is not None:
            return self.max_receive_count
        return derived_max_receive_count(self.visibility_timeout_s)

    @property
    def source_retention_s(self) -> int:
        return c.DEFAULT_SOURCE_RETENTION_S

    @property
    def dlq_retention_s(self) -> int:
        """14 days, SQS's longest, and longer than the source queue's."""
        return c.DLQ_RETENTION_S

    @property
    def record_retention_s(self) -> int:
        """A record outlives both queues by a day, so that a late redrive is still
        deduplicated."""
        return self.source_retention_s + self.dlq_retention_s + c.DAY_S

    @property
    def oldest_message_alarm_s(self) -> int:
        """A message older than its longest allowed retrying (every receive waiting a whole
        visibility timeout) is stuck, not merely retried."""
        return self.receive_count * self.visibility_timeout_s
