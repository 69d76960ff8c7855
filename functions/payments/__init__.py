"""The example service: credits an account ledger once per payment, and says so on a
notifications queue.

Its own names live here, not in ``once.constants``: the CDK app (``infra/``) reads them to
configure the function, and ``payments.handler`` reads the same strings at run time.
"""

from typing import Final

#: POWERTOOLS_SERVICE_NAME of the example: the record key prefix and the metrics' service.
SERVICE_NAME: Final = "payments"
#: The environment variable that names the ledger table.
ENV_LEDGER_TABLE_NAME: Final = "LEDGER_TABLE_NAME"
#: The environment variable that holds the URL of the queue credited payments are announced on.
ENV_NOTIFICATIONS_QUEUE_URL: Final = "NOTIFICATIONS_QUEUE_URL"
#: The ``status`` of the notification sent for a credited payment: ``{"paymentId", "account",
#: "amount", "status"}``, the payment as credited.
STATUS_CREDITED: Final = "credited"
