"""Lambda SnapStart: what once builds before a snapshot, and what it builds again after.

With SnapStart on published versions, Lambda runs a version's INIT once, snapshots the
environment, and starts every later cold environment of that version from the snapshot. What
INIT built is shared by every restored environment; what it connected is dead in them. The
Python managed runtime calls the hooks registered with its ``snapshot_restore_py`` module
just before the snapshot and just after each restore; elsewhere that module is absent and
nothing here runs.

- Before the snapshot, each handler ``make_handler`` built is primed (``Handler.prime``):
  its configuration is resolved and its processor and DynamoDB client are built, calling no
  AWS API, so that botocore's imports and service models are in the snapshot instead of in
  the first record after each restore. A handler whose configuration is incomplete is left
  as it is (the first invocation says what is missing); a priming that raises is logged,
  and never fails the snapshot.
- After a restore, each handler drops what it built (``Handler.refresh``): the processor and
  its threads, the clients and any connection a team's own priming invocation opened. The
  first invocation builds them again from the session's cached models (a few ms). The
  credentials are the session's provider's: with SnapStart, Lambda gives a function
  container credentials, which botocore refreshes itself.

Nothing unique survives a snapshot in once: a claim's owner token is drawn from the
operating system's randomness at each claim, never at INIT. The handlers are held weakly:
registering one keeps nothing alive.
"""

from __future__ import annotations

import importlib
import threading
import weakref
from typing import Protocol

from once.observability import log_safely, logger

#: The Lambda runtime's hook registry (on PyPI as ``snapshot-restore-py``).
RUNTIME_HOOKS_MODULE = "snapshot_restore_py"


class Primable(Protocol):
    """What this module needs of a handler (``once.handler.Handler`` is one): the handler
    imports this module to register itself, never the other way round."""

    def prime(self) -> bool:
        """Build what the first invocation would, calling no AWS API; False when the
        configuration is incomplete."""
        ...

    def refresh(self) -> None:
        """Close what the snapshot holds connected or running, after a restore."""
        ...


_handlers: weakref.WeakSet[Primable] = weakref.WeakSet()
_lock = threading.Lock()
_hooked = False


def register(handler: Primable) -> None:
    """Prime ``handler`` before a snapshot and refresh it after a restore. The hooks are
    registered with the runtime once per process, when its module is there."""
    global _hooked
    with _lock:
        _handlers.add(handler)
        if _hooked:
            return
        try:
            hooks = importlib.import_module(RUNTIME_HOOKS_MODULE)
        except ImportError:
            return
        hooks.register_before_snapshot(before_snapshot)
        hooks.register_after_restore(after_restore)
        _hooked = True


def before_snapshot() -> None:
    """Prime every live handler; a failure is logged, never raised into the snapshot."""
    for handler in list(_handlers):
        try:
            if not handler.prime():
                log_safely(
                    logger, "warning", "not primed for the snapshot: configuration incomplete"
                )
        except Exception as error:
            log_safely(logger, "warning", "not primed for the snapshot", error=type(error).__name__)


def after_restore() -> None:
    """Drop what every live handler built before the snapshot."""
    for handler in list(_handlers):
        handler.refresh()
