"""The CLI's failures, each with its own exit code, so scripts and CI can tell them apart.

Every error the CLI expects (no credentials, stack not found, engine missing...) is raised
as a ``CliError`` subclass and printed as one clear line by ``cli.main``; anything else is
a bug and gets a traceback. ``epilog`` writes the exit codes a command can return into its
``--help``, from the same classes.
"""

from __future__ import annotations

import signal


class CliError(Exception):
    """An expected failure: a message for the user and an exit code."""

    exit_code = 1
    meaning = "no AWS region, or the stack could not be described"


class UsageError(CliError):
    exit_code = 2
    meaning = "bad arguments"


class NoCredentials(CliError):
    exit_code = 3
    meaning = "no AWS credentials"


class StackNotFound(CliError):
    exit_code = 4
    meaning = "the stack does not exist, or has no once outputs"


class EngineNotInstalled(CliError):
    exit_code = 5
    meaning = "DynamoDB Local is not installed (npm install)"


class JavaMissing(CliError):
    exit_code = 6
    meaning = "Java is missing (DynamoDB Local needs Java 17)"


class UnshareNotPermitted(CliError):
    exit_code = 7
    meaning = "a private network namespace (unshare -n) is not permitted"


class EngineFailed(CliError):
    """An engine was installed but did not start, or the local deploy failed."""

    exit_code = 8
    meaning = "an engine did not start or cannot be reached, or the local deploy failed"


class SynthFailed(CliError):
    exit_code = 9
    meaning = "cdk synth of the local stage failed, or there is no CDK app here"


class RecordNotFound(CliError):
    exit_code = 10
    meaning = "no record for that key"


#: The signals the CLI turns into an orderly exit (engines stopped) with 128 + the signal.
EXIT_SIGNALS = (signal.SIGTERM, signal.SIGHUP)


def epilog(*errors: type[CliError], failure: str | None = None) -> str:
    """The exit codes of a command, for the end of its ``--help``.

    ``failure`` replaces the meaning of exit 1 where the command gives it its own.
    """
    lines = ["exit codes:", "  0    success"]
    rows = {1: failure or CliError.meaning, UsageError.exit_code: UsageError.meaning}
    rows.update({error.exit_code: error.meaning for error in errors if error.exit_code != 1})
    lines += [f"  {code:<4} {meaning}" for code, meaning in sorted(rows.items())]
    lines.append("  130  interrupted (Ctrl-C)")
    stops = sorted(EXIT_SIGNALS, key=lambda s: s.value)
    lines += [f"  {128 + s.value:<4} stopped by {s.name}" for s in stops]
    return "\n".join(lines)
