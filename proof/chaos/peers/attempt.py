"""What the peers hand business code: the same attributes as ``once.Attempt``.

A copy rather than an import, so that loading a peer does not load ``once`` (and its
clients, logger and tracer) and a peer's cost is its own. Neither peer has a fence:
``fence`` is always 0, ``takeover`` always False, ``record`` always None.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Attempt:
    key: str
    fence: int
    message_id: str
    takeover: bool = False
    record: Any = None
