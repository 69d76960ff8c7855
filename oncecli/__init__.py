"""The ``once`` command: ``cli`` parses, ``operate`` works on a deployed stack, and the
packages do the rest: ``localcloud`` (the stack on this machine), ``demo``, ``chaos`` (the
fault-injection harness) and ``bench`` (the benchmarks)."""
