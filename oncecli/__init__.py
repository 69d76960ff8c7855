"""The ``once`` command: ``cli`` parses, ``operate`` works on a deployed stack, and the
packages do the rest: ``localcloud`` (the stack on this machine), ``demo``, ``chaos`` (the
fault-injection harness) and ``bench`` (the benchmarks).

It stands on ``once`` (the runtime) and ``once_cdk`` (the construct), which never import it.
Inside, its modules sit on four floors; each imports its own floor and the ones below, never
one above (``tests/unit/test_layering.py`` holds the list)::

    local cloud  localcloud, and what it stands on: aws (clients, queue reads), errors
                 (what the command says when it stops), project (the team's CDK app)
    commands     operate and redrive (work on a stack, local or deployed), and testing:
                 the ``once_cloud`` pytest plugin, the local cloud as ``once status`` reads it
    proof        demo, chaos, bench and ledger (the example's ledger read back): the
                 repository's proof, which may import the example (``payments``)
    entry point  cli: the parser, which knows every command, ``once demo`` and ``once
                 chaos`` among them; nothing imports it

This ``__init__`` runs before any of them, so it imports nothing.
"""
