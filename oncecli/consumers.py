"""A stack's once consumers, read from its CloudFormation outputs.

Why a module: the commands (``once send``, ``status``, ``inspect``, ``redrive``, ``logs``,
``invoke``) and the local cloud find a stack's consumers in the outputs that
``once_cdk.add_cli_outputs`` writes (``once.constants.OUTPUT_KEYS``): a stack with one
consumer under the plain keys (``QueueUrl``...), a stack with several each consumer's under
its construct id (``RefundsQueueUrl``...); every output's description names its consumer.
One reader, so that every command agrees on which consumers a stack has and what each is
called (``--consumer NAME``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from once import constants as c
from oncecli.errors import StackNotFound, UsageError

_QUEUE = c.OUTPUT_REQUIRED[0]


def _named(description: str | None) -> str:
    if description and description.startswith(c.OUTPUT_DESCRIPTION_PREFIX):
        return description[len(c.OUTPUT_DESCRIPTION_PREFIX) :].split(":", 1)[0].strip()
    return ""


def consumers_in(outputs: Sequence[Mapping[str, str]]) -> dict[str, dict[str, str]]:
    """Each consumer's name and its outputs under the plain keys, from a stack's outputs as
    ``DescribeStacks`` lists them (``OutputKey``, ``OutputValue``, ``Description``). A
    consumer is there when its required outputs are; a plain-key consumer whose outputs name
    no consumer (a stack from before the descriptions) is called ``""``."""
    values = {o["OutputKey"]: o["OutputValue"] for o in outputs}
    names = {o["OutputKey"]: _named(o.get("Description")) for o in outputs}
    found: dict[str, dict[str, str]] = {}
    for key in sorted(values):
        if not key.endswith(_QUEUE):
            continue
        prefix = key[: -len(_QUEUE)]
        own = {k: values[prefix + k] for k in c.OUTPUT_KEYS if prefix + k in values}
        if all(k in own for k in c.OUTPUT_REQUIRED):
            found[names[key] or prefix] = own
    return found


def choose(
    stack: str, found: Mapping[str, dict[str, str]], name: str | None
) -> tuple[str, dict[str, str]]:
    """The consumer ``--consumer NAME`` names, or the stack's only one; a clear error that
    lists the stack's consumers otherwise."""
    listed = ", ".join(sorted(n or "(unnamed)" for n in found))
    if not found:
        raise StackNotFound(
            f"stack {stack} has no once consumer outputs ({', '.join(c.OUTPUT_REQUIRED)}): "
            "is it a once stack? (once_cdk's add_cli_outputs(consumer) adds them)"
        )
    if name is not None:
        if name in found:
            return name, dict(found[name])
        raise UsageError(f"stack {stack} has no consumer {name!r}; its consumers: {listed}")
    if len(found) == 1:
        ((only, outputs),) = found.items()
        return only, dict(outputs)
    raise UsageError(f"which consumer? stack {stack} has {listed}: pass --consumer NAME")
