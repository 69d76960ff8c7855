"""Retry backoff: how long a record reported in ``batchItemFailures`` stays invisible before
SQS delivers it again, and on which queue URL to say so.

Without it a failed, BUSY or lease-lost record comes back only after the queue's visibility
timeout (six times the function timeout). With it, the n-th receive of a message waits
``min(max_s, base_s * 2**(n-1))`` seconds, and a BUSY one no longer than the holder's
lease still needs (+1 s): the record that refused the claim says when that lease ends.
Pure functions, so the decisions are tested row by row; ``visibility.py`` does the I/O.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from once import constants as c

#: SQS's longest visibility timeout (12 hours).
SQS_MAX_VISIBILITY_S = 43_200
#: Past this exponent the delay is the maximum anyway; no need to build huge integers.
_MAX_EXPONENT = 32


@dataclass(frozen=True)
class Backoff:
    """``backoff_base_s`` and ``backoff_max_s`` of ``make_handler``."""

    base_s: int
    max_s: int

    def __post_init__(self) -> None:
        if self.base_s < 1:
            raise ValueError(f"backoff_base_s must be at least 1 s (got {self.base_s})")
        if not self.base_s <= self.max_s <= SQS_MAX_VISIBILITY_S:
            raise ValueError(
                f"backoff_max_s must be between backoff_base_s ({self.base_s}) and "
                f"SQS's longest visibility timeout, {SQS_MAX_VISIBILITY_S} s (got {self.max_s})"
            )

    def delay_s(self, receive_count: int) -> int:
        """d(n) = min(max_s, base_s * 2**(n-1)), n = ApproximateReceiveCount (1 or more)."""
        exponent = min(max(receive_count, 1) - 1, _MAX_EXPONENT)
        return min(self.max_s, self.base_s * 2**exponent)

    def busy_delay_s(self, receive_count: int, holder_remaining_ms: int | None) -> int:
        """A BUSY record: d(n), but no later than the holder's lease ends, plus 1 s."""
        delay = self.delay_s(receive_count)
        if holder_remaining_ms is None:
            return delay
        return min(delay, max(0, math.ceil(holder_remaining_ms / 1000)) + 1)


#: ``ONCE_BACKOFF``'s value for no backoff (each retry waits a whole visibility timeout).
_OFF = "off"


def to_env(backoff: Backoff | None) -> str:
    """How the construct passes a backoff to the function (``constants.ENV_BACKOFF``):
    ``<base_s>,<max_s>``, or ``off``."""
    return _OFF if backoff is None else f"{backoff.base_s},{backoff.max_s}"


def from_env(text: str) -> Backoff | None:
    """The backoff ``ONCE_BACKOFF`` declares; ``ValueError`` naming the variable for a value
    ``to_env`` does not write."""
    if text.strip() == _OFF:
        return None
    base, _, most = text.partition(",")
    try:
        return Backoff(int(base), int(most))
    except ValueError as error:
        raise ValueError(
            f"{c.ENV_BACKOFF} must be <base_s>,<max_s> (e.g. 2,300) or {_OFF} (got {text!r}): "
            f"{error}"
        ) from None


def source_queue_url(endpoint_url: str, event_source_arn: str) -> str:
    """The source queue's URL from a record's ``eventSourceARN``
    (``arn:<partition>:sqs:<region>:<account>:<name>``), on the SQS client's own endpoint:
    AWS's regional one, or the one the client was made with (``AWS_ENDPOINT_URL_SQS``)."""
    parts = event_source_arn.split(":", 5)
    if len(parts) != 6 or parts[2] != "sqs" or not parts[4] or not parts[5]:
        raise ValueError(f"not an SQS queue ARN: {event_source_arn!r}")
    return f"{endpoint_url.rstrip('/')}/{parts[4]}/{parts[5]}"
