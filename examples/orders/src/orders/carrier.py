"""The carrier's shipping API: the downstream effect of an order.

Every request carries an ``Idempotency-Key``. If an attempt created the shipment and then
crashed before once recorded it, the retry sends the same key and the carrier answers with
the shipment it already made instead of shipping twice.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from typing import Any

from once import PermanentError


class CarrierError(Exception):
    """The carrier could not be reached or failed: worth retrying."""


class Carrier:
    """A client of ``POST {base_url}/shipments``."""

    def __init__(self, base_url: str, timeout_s: float = 5.0) -> None:
        self._url = base_url.rstrip("/") + "/shipments"
        self._timeout_s = timeout_s

    def create_shipment(self, shipment: dict[str, Any], *, idempotency_key: str) -> dict[str, Any]:
        """The shipment the carrier made for this key, now or on an earlier attempt."""
        request = urllib.request.Request(
            self._url,
            data=json.dumps(shipment).encode(),
            headers={"Content-Type": "application/json", "Idempotency-Key": idempotency_key},
            method="POST",
        )
        try:
            with urllib.request.urlopen(request, timeout=self._timeout_s) as response:
                return json.loads(response.read())
        except urllib.error.HTTPError as error:
            if 400 <= error.code < 500 and error.code not in (408, 429):
                # The carrier refuses this shipment: retrying the same request cannot help.
                raise PermanentError(f"carrier refused the shipment: HTTP {error.code}") from None
            raise CarrierError(f"carrier failed: HTTP {error.code}") from None
        except (urllib.error.URLError, TimeoutError) as error:
            raise CarrierError(f"carrier unreachable: {error}") from None
