"""once_cdk: the CDK construct library of once.

Public API::

    from once_cdk import OnceConsumer
    consumer = OnceConsumer(stack, "Orders", code_dir="src",
                            handler="orders.handler.lambda_handler", service_name="orders")
    add_cli_outputs(consumer)  # optional: the outputs the `once` command reads

``OnceConsumer`` builds the queue and its DLQ (or consumes an existing queue: ``queue=``),
the idempotency table, the function with the once runtime shipped beside the user's code,
the event source mapping, a least-privilege role, the alarms and a dashboard. The
application grants the function its own resources.

The floor above the runtime: it imports ``once`` (the names the stack and the runtime share,
``once.constants``, and the settings they both check) and the CDK, never ``oncecli``, which
imports it to synthesize a team's app (``tests/unit/house/test_layering.py``).
"""

from once_cdk.consumer import OnceConsumer
from once_cdk.outputs import add_cli_outputs
from once_cdk.settings import ConfigurationError

__all__ = ["ConfigurationError", "OnceConsumer", "add_cli_outputs"]
