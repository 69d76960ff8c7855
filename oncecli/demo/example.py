"""The once repository's example app, found in the checkout the command runs in.

Why a module: the wheel ships ``once``, ``once_cdk`` and ``oncecli`` only; the example
service (``payments``, in the checkout's ``functions/``) is not installed, so that it never
shadows a team's own ``payments``. The demo, the chaos harness and the benchmarks run that
example (its CDK app, its handler, its ledger), so they run in a checkout: ``require`` finds
it, puts its ``functions/`` on ``sys.path`` (after what is installed, and inherited by the
worker processes they spawn), and says clearly when there is no checkout. The example's
names (its service name, its ledger's key prefixes) are then imported from the example
itself, never copied here.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

from oncecli.errors import NotInCheckout

#: The example service's package, in the checkout's ``functions/``.
PACKAGE = "payments"


#: The source tree this module runs from: the checkout itself in an editable install.
SOURCE = Path(__file__).resolve().parents[2]


def _is_checkout(path: Path) -> bool:
    return (path / "cdk.json").is_file() and (path / "functions" / PACKAGE / "handler.py").is_file()


def find_checkout(start: Path | None = None) -> Path | None:
    """The once repository's checkout: the source tree this package runs from when it is one
    (an editable install, or ``python -m`` in the repository), else the nearest directory at
    or above ``start`` (default: the working directory) that holds the example app."""
    here = (start or Path.cwd()).resolve()
    for candidate in (SOURCE, here, *here.parents):
        if _is_checkout(candidate):
            return candidate
    return None


def functions_dir(start: Path | None = None) -> Path:
    """The checkout's ``functions/`` (the example's Lambda asset root), or ``NotInCheckout``."""
    checkout = find_checkout(start)
    if checkout is None:
        here = (start or Path.cwd()).resolve()
        raise NotInCheckout(
            f"the example app of the once repository is not in {here} or above it: "
            "the demo, the chaos harness and the benchmarks run the example app of the once "
            "repository, so run them in a checkout (git clone, then cd into it)"
        )
    return checkout / "functions"


def require(start: Path | None = None) -> Path:
    """Make the example importable (``import payments...``) from the checkout, and return
    the checkout's ``functions/``.

    Idempotent and cheap: each tool calls it before its first use of the example. Appended
    to ``sys.path``, so the installed ``once`` is the one that runs; a ``payments`` found
    elsewhere first (a team's own) is refused rather than run in the example's place.
    """
    functions = functions_dir(start)
    if str(functions) not in sys.path:
        sys.path.append(str(functions))
    spec = importlib.util.find_spec(PACKAGE)
    origin = Path(spec.origin).resolve() if spec is not None and spec.origin else None
    if origin is None or not origin.is_relative_to(functions.resolve()):
        raise NotInCheckout(
            f"the {PACKAGE!r} package imported here is {origin or 'not importable'}, not the "
            f"example's in {functions}: another {PACKAGE!r} comes first on sys.path"
        )
    return functions
