"""The ``once`` command a team runs on its own app: ``cli`` parses, ``operate`` works on a
stack (local or deployed), ``localcloud`` runs the team's synthesized app on this machine,
and ``testing`` is the ``once_cloud`` pytest plugin.

It stands on ``once`` (the runtime) and ``once_cdk`` (the construct), which never import it;
the repository's proof (``proof/``: demo, chaos harness, benchmarks) stands on it and is not
part of it. Inside, its modules sit on three floors; each imports its own floor and the ones
below, never one above (``tests/unit/house/test_layering.py`` holds the list)::

    local cloud  localcloud, and what it stands on: aws (clients, queue reads), consumers
                 (a stack's consumers, from its outputs), errors (what the command says
                 when it stops), project (the team's CDK app)
    commands     operate and redrive (work on a stack, local or deployed), and testing:
                 the ``once_cloud`` pytest plugin, the local cloud as ``once status`` reads it
    entry point  cli: the parser and ``guarded`` (a command's exit codes), which the proof's
                 own entry points use too

This ``__init__`` runs before any of them, so it imports nothing.
"""
