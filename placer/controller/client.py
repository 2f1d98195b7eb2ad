"""Reading a running controller's read-only API (``/v1/...``) with httpx.

``placer fleet show --server URL`` uses :func:`fetch_fleet`: the controller serves its fleet as
a FleetSnapshot document, so the answer is read exactly like a snapshot file.
"""

from __future__ import annotations

from typing import Any

import httpx

from placer.errors import PlacerError
from placer.model import Fleet
from placer.snapshot import fleet_from_dict

__all__ = ["fetch", "fetch_fleet"]


def fetch(server: str, path: str, *, timeout: float = 10.0) -> Any:
    """``GET server + path`` as JSON; placer errors for transport failures and error answers."""
    url = server.rstrip("/") + path
    try:
        response = httpx.get(url, timeout=timeout, follow_redirects=True)
    except httpx.HTTPError as exc:
        raise PlacerError(
            f"cannot reach the controller at {url}: {exc}",
            hint="check --server (the controller's --metrics-port), e.g. through "
            "`kubectl port-forward -n placer-system deploy/placer-controller 8080`",
        ) from None
    if response.status_code != 200:
        try:
            detail = response.json().get("error", "")
        except ValueError:
            detail = response.text.strip()[:200]
        raise PlacerError(f"the controller at {url} answered {response.status_code}: {detail}")
    try:
        return response.json()
    except ValueError:
        raise PlacerError(f"the controller at {url} did not answer JSON") from None


def fetch_fleet(server: str, *, timeout: float = 10.0) -> Fleet:
    """The fleet a controller decides on (``GET /v1/fleet``)."""
    data = fetch(server, "/v1/fleet", timeout=timeout)
    return fleet_from_dict(data, source=f"{server.rstrip('/')}/v1/fleet")
