"""once: make an SQS-delivered business operation take effect once.

Public API::

    from once import make_handler, Attempt, PermanentError
    lambda_handler = make_handler(process, key="orderId")
"""

from once.handler import make_handler
from once.models import Attempt, PermanentError

__all__ = ["Attempt", "PermanentError", "make_handler"]
