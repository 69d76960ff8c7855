"""``make chaos`` (``python -m proof.chaos``): the fault-injection harness from a checkout."""

from __future__ import annotations

import sys

from oncecli.cli import guarded
from proof.chaos import command


def main(argv: list[str] | None = None) -> int:
    """Run the harness; returns its exit code."""
    args = command.build_parser().parse_args(argv)
    return guarded("chaos", lambda: command.run(args))


if __name__ == "__main__":
    sys.exit(main())
