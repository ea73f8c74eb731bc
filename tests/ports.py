"""Ports for the servers the tests start on 127.0.0.1."""

from __future__ import annotations

import random
import socket

# Linux hands out client ports from 32768-60999 (net.ipv4.ip_local_port_range). A port the kernel chose by binding
# port 0 comes from that range too, so between releasing it and a server binding it, any outgoing connection of the
# suite (Spark, moto, Airflow's workers) can take it: "Address already in use" at a server's start. Ports below the
# range are only ever taken by another listener, which this module's random choice makes unlikely.
_LISTEN_PORTS = range(20000, 32768)


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now, outside the kernel's range for client ports."""
    for port in random.sample(_LISTEN_PORTS, 200):
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise RuntimeError("no free TCP port on 127.0.0.1 in 20000-32767")
