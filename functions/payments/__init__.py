"""The example service: credits an account ledger once per payment.

Its own names live here, not in ``once.constants``: the CDK app (``infra/``) reads them to
configure the function, and ``payments.handler`` reads the same strings at run time.
"""

from typing import Final

#: POWERTOOLS_SERVICE_NAME of the example: the record key prefix and the metrics' service.
SERVICE_NAME: Final = "payments"
#: The environment variable that names the ledger table.
ENV_LEDGER_TABLE_NAME: Final = "LEDGER_TABLE_NAME"
