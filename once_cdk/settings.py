"""What an ``OnceConsumer`` derives from its arguments, and the rules that refuse bad ones.

Plain numbers, no CDK: every value that must not be typed by hand (the visibility timeout,
``maxReceiveCount``, the retentions, the alarm thresholds) is computed here and tested row by
row, and a setting that breaks a rule raises ``ConfigurationError`` at synth, naming the
setting, the rule and what to do. The retry backoff's defaults come from ``once.constants``
and its formula from ``once.backoff``, the modules the runtime reads them from. The backoff is
declared once, here (``backoff=``): the construct derives ``maxReceiveCount`` from it and
passes it to the function (``ONCE_BACKOFF``), where ``make_handler`` without backoff
arguments runs it.
"""

from __future__ import annotations

import dataclasses
import re
from typing import Final

from once import constants as c
from once import event_filters
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
#: ``make_handler``'s backoff unless the team passes its own: what ``backoff=`` assumes.
DEFAULT_BACKOFF: Final = Backoff(c.DEFAULT_BACKOFF_BASE_S, c.DEFAULT_BACKOFF_MAX_S)
#: Lambda's bounds on an SQS event source mapping and on a function.
MIN_MAX_CONCURRENCY: Final = 2
MAX_MAX_CONCURRENCY: Final = 1000
#: Provisioned mode of an SQS event source mapping: the bounds of its minimum and of its
#: maximum number of event pollers (Lambda's SQS parameters; the API's own range for the
#: minimum starts at 1, for Kafka), and how many invocations one poller runs at once.
MIN_POLLERS: Final = 2
MAX_MINIMUM_POLLERS: Final = 200
MAX_MAXIMUM_POLLERS: Final = 2000
INVOCATIONS_PER_POLLER: Final = 10
STANDARD_MAX_BATCH_SIZE: Final = 10_000
#: A standard queue's batch above this size needs a batching window of at least 1 s.
BATCH_SIZE_WITHOUT_WINDOW: Final = 10
MAX_BATCHING_WINDOW_S: Final = 300
MAX_TIMEOUT_S: Final = 900
MIN_MEMORY_MB: Final = 128
MAX_MEMORY_MB: Final = 10_240
#: The service name prefixes every record key and names the metrics: short and plain.
SERVICE_NAME_PATTERN: Final = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
#: Environment variables the construct sets itself from its resources and arguments;
#: ``environment=`` may not override them. It sets ``POWERTOOLS_METRICS_NAMESPACE`` too, but
#: to the one ``environment=`` gives, if any (else ``Once``): the function's metrics, the
#: alarms and the dashboard then read that namespace (``OnceConsumer``).
RESERVED_ENVIRONMENT: Final = (
    c.ENV_TABLE_NAME,
    c.ENV_DLQ_URL,
    c.ENV_SERVICE_NAME,
    c.ENV_RETENTION_S,
    c.ENV_BACKOFF,
)


class ConfigurationError(ValueError):
    """An ``OnceConsumer`` setting breaks a rule of the protocol or of AWS."""


def backoff_s(receive_count: int, backoff: Backoff | None, visibility_timeout_s: int) -> int:
    """How long the runtime hides a record after its n-th receive failed: the backoff's own
    ``Backoff.delay_s``, d(n) = min(max, base * 2**(n-1)); without backoff, the queue's
    visibility timeout."""
    if backoff is None:
        return visibility_timeout_s
    return backoff.delay_s(receive_count)


def retry_window_s(receives: int, backoff: Backoff | None, visibility_timeout_s: int) -> int:
    """The sum of the backoffs over ``receives`` receives: how long retries last before the
    message moves to the DLQ, when every receive fails at once."""
    return sum(backoff_s(n, backoff, visibility_timeout_s) for n in range(1, receives + 1))


def derived_max_receive_count(visibility_timeout_s: int, backoff: Backoff | None) -> int:
    """The fewest receives (at least 5) whose retry window covers 5 visibility timeouts.

    Once the delay reaches its cap (the backoff's maximum; without backoff, the visibility
    timeout) every further receive adds the cap: the rest is one division, not a walk over
    thousands of receives when the backoff is short.
    """
    needed = RETRY_WINDOW_VISIBILITY_TIMEOUTS * visibility_timeout_s
    cap = visibility_timeout_s if backoff is None else backoff.max_s
    receives = window = 0
    while receives < MIN_MAX_RECEIVE_COUNT or window < needed:
        delay = backoff_s(receives + 1, backoff, visibility_timeout_s)
        if delay == cap:
            uncovered = needed - window
            return receives + max(MIN_MAX_RECEIVE_COUNT - receives, -(-uncovered // cap))
        receives += 1
        window += delay
    return receives


def visibility_timeout_for(timeout_s: float, batching_window_s: float) -> int:
    """6 x the function timeout + the batching window."""
    return int(VISIBILITY_TIMEOUT_FACTOR * timeout_s + batching_window_s)


def passing_receive_counts(
    visibility_timeout_s: int, backoff: Backoff | None, source_retention_s: int
) -> range:
    """Every maxReceiveCount that keeps every rule (empty when none does): from the derived
    count (at least 5, a retry window of 5 visibility timeouts) up to SQS's 1000 and to the
    most whose whole visibility timeouts stay shorter than the source queue's retention."""
    fits = (source_retention_s - 1) // visibility_timeout_s
    highest = min(SQS_MAX_RECEIVE_COUNT, fits)
    return range(derived_max_receive_count(visibility_timeout_s, backoff), highest + 1)


def longest_passing_timeout_s(
    batching_window_s: float, backoff: Backoff | None, source_retention_s: int
) -> int | None:
    """The longest whole-second function timeout for which some maxReceiveCount passes, with
    this batching window and backoff (None if not even 1 s does). A longer timeout only
    raises the derived count and lowers the count the retention allows."""

    def passes(timeout_s: int) -> bool:
        visibility = visibility_timeout_for(timeout_s, batching_window_s)
        return bool(passing_receive_counts(visibility, backoff, source_retention_s))

    if not passes(1):
        return None
    low, high = 1, MAX_TIMEOUT_S
    while low < high:
        middle = (low + high + 1) // 2
        low, high = (middle, high) if passes(middle) else (low, middle - 1)
    return low


def describe_backoff(backoff: Backoff | None) -> str:
    """The backoff as a refusal names it."""
    if backoff is None:
        return "no backoff (backoff=None: each retry waits a visibility timeout)"
    kind = "the runtime's default backoff" if backoff == DEFAULT_BACKOFF else "the declared backoff"
    return f"{kind} ({backoff.base_s} s doubling up to {backoff.max_s} s)"


def _whole_seconds_within(value: float, low: int, high: int) -> bool:
    return low <= value <= high and value == int(value)


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
    #: The backoff ``make_handler`` was given (None: backoff off); the construct only
    #: derives and checks maxReceiveCount with it.
    backoff: Backoff | None = DEFAULT_BACKOFF
    #: Provisioned mode: (minimum, maximum) event pollers, or None for Lambda's own scaling.
    provisioned_pollers: tuple[int, int] | None = None
    #: The mapping's EventCount metrics (MetricsConfig), off unless asked for.
    event_count_metrics: bool = False
    #: The mapping's filter patterns (a list of dicts, Lambda's syntax), or None: every
    #: message is delivered. Checked against Lambda's rules (``once.event_filters``).
    filters: object = None
    #: An existing source queue's visibility timeout and retention (``queue=``), as read
    #: from it and checked by ``once_cdk.existing_queue``; None: the construct builds the
    #: queue, with the derived visibility timeout and SQS's default retention.
    queue_visibility_timeout_s: int | None = None
    queue_retention_s: int | None = None

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
        if not _whole_seconds_within(self.timeout_s, 1, MAX_TIMEOUT_S):
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
        found += self._poller_problems()
        if not isinstance(self.event_count_metrics, bool):
            found.append(
                f"event_count_metrics={self.event_count_metrics!r}: pass True to have the "
                "mapping publish its EventCount metrics, or False (the default)"
            )
        if self.filters is not None:
            found += event_filters.problems(self.filters)
        reserved = sorted(set(self.environment) & set(RESERVED_ENVIRONMENT))
        if reserved:
            found.append(
                f"environment sets {', '.join(reserved)}: OnceConsumer sets these itself from "
                "its own resources and arguments"
            )
        found += self._receive_count_problems()
        return found

    def _batching_problems(self) -> list[str]:
        found: list[str] = []
        limit = c.FIFO_MAX_BATCH_SIZE if self.fifo else STANDARD_MAX_BATCH_SIZE
        if not 1 <= self.batch_size <= limit:
            kind = "a FIFO queue" if self.fifo else "a standard queue"
            found.append(f"batch_size={self.batch_size}: {kind} takes 1 to {limit}")
        if not _whole_seconds_within(self.batching_window_s, 0, MAX_BATCHING_WINDOW_S):
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
        if reserved is not None and maximum is None and self.provisioned_pollers is None:
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

    def _poller_problems(self) -> list[str]:
        """Provisioned mode: two whole numbers within Lambda's bounds for SQS, the minimum
        not above the maximum; never with max_concurrency, which Lambda refuses beside it;
        and a reservation that the pollers at their maximum do not outgrow."""
        pollers = self.provisioned_pollers
        if pollers is None:
            return []
        if not (
            isinstance(pollers, tuple)
            and len(pollers) == 2
            and all(isinstance(n, int) and not isinstance(n, bool) for n in pollers)
        ):
            return [
                f"provisioned_pollers={pollers!r}: pass (minimum, maximum), two whole "
                f"numbers of event pollers, e.g. ({MIN_POLLERS}, 20); or None for Lambda's "
                "own scaling"
            ]
        found: list[str] = []
        minimum, maximum = pollers
        name = f"provisioned_pollers={pollers!r}"
        if not MIN_POLLERS <= minimum <= MAX_MINIMUM_POLLERS:
            found.append(
                f"{name}: an SQS event source mapping takes a minimum of {MIN_POLLERS} to "
                f"{MAX_MINIMUM_POLLERS} event pollers, not {minimum}"
            )
        if not MIN_POLLERS <= maximum <= MAX_MAXIMUM_POLLERS:
            found.append(
                f"{name}: an SQS event source mapping takes a maximum of {MIN_POLLERS} to "
                f"{MAX_MAXIMUM_POLLERS} event pollers, not {maximum}"
            )
        if minimum > maximum:
            found.append(
                f"{name}: the minimum {minimum} is above the maximum {maximum}; pass "
                "(minimum, maximum) with the minimum at most the maximum"
            )
        if self.max_concurrency is not None:
            found.append(
                f"{name} with max_concurrency={self.max_concurrency}: Lambda refuses a "
                "mapping in provisioned mode that also has a maximum concurrency; leave "
                "max_concurrency unset and bound the mapping with the maximum of pollers "
                f"(each runs up to {INVOCATIONS_PER_POLLER} invocations at once), or drop "
                "provisioned_pollers"
            )
        reserved = self.reserved_concurrency
        needed = INVOCATIONS_PER_POLLER * maximum
        if not found and reserved is not None and reserved < needed:
            # The most pollers the reservation serves, if that still leaves a valid pair.
            fewer = reserved // INVOCATIONS_PER_POLLER
            lower = (
                f", or lower the maximum of pollers to {fewer}"
                if fewer >= max(MIN_POLLERS, minimum)
                else ""
            )
            found.append(
                f"reserved_concurrency={reserved} is below what {maximum} pollers run at once "
                f"({maximum} x {INVOCATIONS_PER_POLLER} = {needed}): the mapping's invocations "
                f"would be throttled; reserve at least {needed}{lower}"
            )
        return found

    def _receive_count_problems(self) -> list[str]:
        """maxReceiveCount, given or derived, against every rule at once: at least 5, a retry
        window of 5 visibility timeouts under the handler's backoff, at most SQS's 1000, and
        whole visibility timeouts shorter than the source queue's retention. A refusal
        suggests only counts that pass all of them, or says that none does and what to
        change."""
        if self.backoff is not None and not isinstance(self.backoff, Backoff):
            return [
                f"backoff={self.backoff!r}: expected once.backoff.Backoff(backoff_base_s, "
                "backoff_max_s) with the values passed to make_handler, or None when "
                "make_handler was given backoff_base_s=None"
            ]
        given = self.max_receive_count
        if not (
            _whole_seconds_within(self.timeout_s, 1, MAX_TIMEOUT_S)
            and _whole_seconds_within(self.batching_window_s, 0, MAX_BATCHING_WINDOW_S)
        ):
            # Which counts pass follows from the visibility timeout, unknown here.
            if given is not None and not MIN_MAX_RECEIVE_COUNT <= given <= SQS_MAX_RECEIVE_COUNT:
                return [
                    f"max_receive_count={given}: must be from {MIN_MAX_RECEIVE_COUNT} to "
                    f"{SQS_MAX_RECEIVE_COUNT}, and which of those pass depends on the timeout "
                    "and the batching window: correct them first"
                ]
            return []
        visibility, count = self.visibility_timeout_s, self.receive_count
        passing = passing_receive_counts(visibility, self.backoff, self.source_retention_s)
        if count in passing:
            return []
        needed = RETRY_WINDOW_VISIBILITY_TIMEOUTS * visibility
        window = retry_window_s(count, self.backoff, visibility)
        too_short = count >= MIN_MAX_RECEIVE_COUNT and window < needed
        reasons: list[str] = []
        if count < MIN_MAX_RECEIVE_COUNT:
            reasons.append(
                f"fewer than {MIN_MAX_RECEIVE_COUNT} receives send a message to the DLQ after "
                "too few attempts"
            )
        elif too_short:
            reasons.append(
                f"under {describe_backoff(self.backoff)} its retries end after {window} s, "
                f"before {RETRY_WINDOW_VISIBILITY_TIMEOUTS} visibility timeouts ({needed} s): "
                f"a BUSY copy of a live batch, or an outage longer than {window} s, would send "
                "messages to the DLQ"
            )
        if count > SQS_MAX_RECEIVE_COUNT:
            reasons.append(f"SQS takes at most {SQS_MAX_RECEIVE_COUNT}")
        elif count * visibility >= self.source_retention_s:
            reasons.append(
                f"{count} x visibility timeout {visibility} s = {count * visibility} s is not "
                f"shorter than the source queue's retention ({self.source_retention_s} s): "
                "when whole batches fail, each retry waits a full visibility timeout and "
                "messages would expire before reaching the DLQ"
            )
        if passing:
            reasons.append(
                f"pass max_receive_count from {passing.start} to {passing.stop - 1} "
                f"(max_receive_count=None derives {passing.start})"
            )
        else:
            reasons.append(self._no_count_passes(visibility, passing))
        if self.backoff == DEFAULT_BACKOFF and (too_short or not passing):
            reasons.append(
                "a handler made with its own backoff declares it here: "
                "backoff=Backoff(backoff_base_s, backoff_max_s), the values passed to "
                "make_handler, or backoff=None when make_handler was given backoff_base_s=None"
            )
        name = (
            f"max_receive_count={count}"
            if given is not None
            else f"the derived maxReceiveCount {count}"
        )
        return [f"{name}: {'; '.join(reasons)}"]

    def _no_count_passes(self, visibility: int, passing: range) -> str:
        """What to change when no maxReceiveCount passes: a shorter timeout (the longest that
        passes, if one does with this batching window), or a longer backoff."""
        longest = longest_passing_timeout_s(
            self.batching_window_s, self.backoff, self.source_retention_s
        )
        change = (
            f"shorten the timeout to at most {longest} s and leave max_receive_count unset"
            if longest is not None
            else "shorten the batching window and the timeout"
        )
        if self.backoff is not None:
            change += ", or give the handler a longer backoff_max_s (and declare it here)"
        return (
            f"no maxReceiveCount passes with a {visibility} s visibility timeout under "
            f"{describe_backoff(self.backoff)}: covering {RETRY_WINDOW_VISIBILITY_TIMEOUTS} "
            f"visibility timeouts takes at least {passing.start} receives, and at most "
            f"{passing.stop - 1} fit SQS's limit and the queue's retention; {change}"
        )

    @property
    def filter_patterns(self) -> tuple[str, ...]:
        """Each filter as the mapping's ``Filter.Pattern`` holds it (none without filters)."""
        if self.filters is None:
            return ()
        return tuple(event_filters.pattern_text(p) for p in event_filters.patterns(self.filters))

    @property
    def visibility_timeout_s(self) -> int:
        """6 x the function timeout + the batching window; an existing queue's own, which
        is at least that."""
        if self.queue_visibility_timeout_s is not None:
            return self.queue_visibility_timeout_s
        return visibility_timeout_for(self.timeout_s, self.batching_window_s)

    @property
    def receive_count(self) -> int:
        """maxReceiveCount: as given, or derived so the retry window covers 5 visibility
        timeouts under the handler's backoff."""
        if self.max_receive_count is not None:
            return self.max_receive_count
        return derived_max_receive_count(self.visibility_timeout_s, self.backoff)

    @property
    def source_retention_s(self) -> int:
        """SQS's default, 4 days; an existing queue's own."""
        if self.queue_retention_s is not None:
            return self.queue_retention_s
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
