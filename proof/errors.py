"""The proof's own failures, beside the ``once`` command's (``oncecli.errors``).

Why apart: only ``make demo`` and ``make chaos`` can fail this way, so the command a team
installs neither raises nor lists them. Each keeps an exit code of its own, distinct from
every code of the command's errors they may also raise (an engine missing, a synth failed),
so that a script tells them apart.
"""

from __future__ import annotations

from oncecli.errors import CliError


class DemoFailed(CliError):
    """The demo ran, but a message was lost or the ledger is wrong."""

    exit_code = 1
    meaning = "the run found a lost message, a wrong ledger or (FIFO) a payment out of order"


class HarnessFailed(CliError):
    """The chaos harness itself failed: its verdict on the consumers would mean nothing."""

    exit_code = 11
    meaning = "the chaos harness itself failed (a worker crashed, or an engine stopped answering)"


class ExampleShadowed(CliError):
    """Another ``payments`` package comes before the checkout's example on ``sys.path``."""

    exit_code = 12
    meaning = "another 'payments' package is imported before the checkout's example"
