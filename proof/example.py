"""The once repository's example app, which the proof runs from this checkout.

Why a module: the wheel ships ``once``, ``once_cdk`` and ``oncecli`` only; the example
service (``payments``, in the checkout's ``functions/``) is not installed, so that it never
shadows a team's own ``payments``. The demo, the chaos harness and the benchmarks run that
example (its CDK app, its handler, its ledger): ``require`` puts the checkout's
``functions/`` on ``sys.path`` (after what is installed, and inherited by the worker
processes they spawn). The example's names (its service name, its ledger's key prefixes)
are then imported from the example itself, never copied here.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

from proof.errors import ExampleShadowed

#: The example service's package, in the checkout's ``functions/``.
PACKAGE = "payments"

#: The checkout the proof lives in, and the example's Lambda asset root in it.
ROOT = Path(__file__).resolve().parents[1]
FUNCTIONS = ROOT / "functions"


def require() -> Path:
    """Make the example importable (``import payments...``) and return the checkout's
    ``functions/``.

    Idempotent and cheap: each tool calls it before its first use of the example. Appended
    to ``sys.path``, so the installed ``once`` is the one that runs; a ``payments`` found
    elsewhere first (a team's own) is refused rather than run in the example's place.
    """
    if str(FUNCTIONS) not in sys.path:
        sys.path.append(str(FUNCTIONS))
    spec = importlib.util.find_spec(PACKAGE)
    origin = Path(spec.origin).resolve() if spec is not None and spec.origin else None
    if origin is None or not origin.is_relative_to(FUNCTIONS.resolve()):
        raise ExampleShadowed(
            f"the {PACKAGE!r} package imported here is {origin or 'not importable'}, not the "
            f"example's in {FUNCTIONS}: another {PACKAGE!r} comes first on sys.path"
        )
    return FUNCTIONS
