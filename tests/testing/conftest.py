"""Fixtures of the loopback-server tests that speak HTTP directly."""

from __future__ import annotations

import http.client
import ssl
from collections.abc import Iterator

import pytest

from placer.testing import ApiServer


@pytest.fixture
def conn(apiserver: ApiServer) -> Iterator[http.client.HTTPSConnection]:
    """One raw keep-alive TLS connection to ``apiserver`` (trusting its CA)."""
    context = ssl.create_default_context(cadata=apiserver.ca_pem.decode())
    connection = http.client.HTTPSConnection(
        "127.0.0.1", apiserver.port, context=context, timeout=10
    )
    yield connection
    connection.close()
