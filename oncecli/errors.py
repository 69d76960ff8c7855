"""The CLI's failures, each with its own exit code, so scripts and CI can tell them apart.

Every error the CLI expects (no credentials, stack not found, engine missing...) is raised
as a ``CliError`` subclass and printed as one clear line by ``cli.main``; anything else is
a bug and gets a traceback.
"""

from __future__ import annotations


class CliError(Exception):
    """An expected failure: a message for the user and an exit code."""

    exit_code = 1


class DemoFailed(CliError):
    """The demo ran, but a message was lost or the ledger is wrong."""

    exit_code = 1


class NoCredentials(CliError):
    exit_code = 3


class StackNotFound(CliError):
    exit_code = 4


class EngineNotInstalled(CliError):
    exit_code = 5


class JavaMissing(CliError):
    exit_code = 6


class UnshareNotPermitted(CliError):
    exit_code = 7


class EngineFailed(CliError):
    """An engine was installed but did not start, or the local deploy failed."""

    exit_code = 8


class SynthFailed(CliError):
    exit_code = 9
