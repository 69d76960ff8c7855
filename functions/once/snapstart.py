"""Lambda's INIT: what once builds before the first invocation (on demand, with provisioned
concurrency, and before a SnapStart snapshot), and what it builds again after a restore.

On demand and with provisioned concurrency, each handler ``make_handler`` built in INIT (its
module's import) is primed there (``Handler.prime``), when Lambda says which INIT it runs
(``AWS_LAMBDA_INITIALIZATION_TYPE``: "on-demand", "provisioned-concurrency", "snap-start",
https://docs.aws.amazon.com/lambda/latest/dg/configuration-envvars.html#configuration-envvars-runtime):
botocore's imports, its service models and the clients are built at INIT's CPU, not at the
first record's. A function's CPU is its memory size's share (one vCPU at 1,769 MB:
https://docs.aws.amazon.com/lambda/latest/dg/configuration-memory.html); at 512 MB the first
record, building them at that share, took 190 ms, and 66 once INIT had (docs/performance.md,
the memory sweep's cold start).

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
import os
import threading
import weakref
from typing import Protocol

from once.observability import log_safely, logger
from once.payload import describe_error

#: The Lambda runtime's hook registry (on PyPI as ``snapshot-restore-py``).
RUNTIME_HOOKS_MODULE = "snapshot_restore_py"
#: Lambda's variable naming the INIT it runs, and the INITs after which an invocation follows
#: in the same environment (not a snapshot's, which ``before_snapshot`` primes).
INIT_TYPE_ENV = "AWS_LAMBDA_INITIALIZATION_TYPE"
PRIMED_AT_INIT = ("on-demand", "provisioned-concurrency")


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
        if not _hooked:
            try:
                hooks = importlib.import_module(RUNTIME_HOOKS_MODULE)
            except ImportError:
                hooks = None
            if hooks is not None:
                hooks.register_before_snapshot(before_snapshot)
                hooks.register_after_restore(after_restore)
                _hooked = True
    if os.environ.get(INIT_TYPE_ENV) in PRIMED_AT_INIT:
        _prime(handler, "at init")


def _prime(handler: Primable, when: str) -> None:
    """Prime ``handler``; a failure is logged, never raised (into INIT or the snapshot): the
    first invocation builds what is missing, or says what is."""
    try:
        if not handler.prime():
            log_safely(logger, "warning", f"not primed {when}: configuration incomplete")
    except Exception as error:
        log_safely(logger, "warning", f"not primed {when}", error=describe_error(error))


def before_snapshot() -> None:
    """Prime every live handler; a failure is logged, never raised into the snapshot."""
    for handler in list(_handlers):
        _prime(handler, "for the snapshot")


def after_restore() -> None:
    """Drop what every live handler built before the snapshot."""
    for handler in list(_handlers):
        handler.refresh()
