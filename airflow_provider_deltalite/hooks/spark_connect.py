"""Spark connections of the Spark provider's ``spark_connect`` type: the ``sc://`` address the operators run on.

The address is the Spark provider's own (`SparkConnectHook.get_connection_url`: host, port, ``user_id`` from the
login, ``token`` from the password, ``use_ssl`` from the extra), so a connection that works for its
``PySparkOperator`` works here. The token is registered with Airflow's secrets masker (as given and URL-encoded, and
the whole address with it) before the address exists; messages name the server by `shown_master`, which drops the
``;token=...`` part.
"""

from __future__ import annotations

import logging
from urllib.parse import quote, urlsplit

from airflow.providers.apache.spark.hooks.spark_connect import SparkConnectHook
from airflow.providers.common.compat.sdk import AirflowNotFoundException, BaseHook, mask_secret

from airflow_provider_deltalite.hooks.deltalite import InvalidConnection

SPARK_CONNECT_CONN_TYPE = SparkConnectHook.conn_type

log = logging.getLogger(__name__)


def spark_connect_url(conn_id: str) -> str | None:
    """The ``sc://`` address of ``conn_id`` when it is a ``spark_connect`` connection; None for any other Spark
    connection and for one that is not defined (the spark-submit path decides what those mean).

    Raises:
        InvalidConnection: a ``spark_connect`` connection without a host, or with a path in it.
    """
    try:
        conn = BaseHook.get_connection(conn_id)
    except AirflowNotFoundException:
        return None
    if conn.conn_type != SPARK_CONNECT_CONN_TYPE:
        return None
    if conn.password:
        mask_secret(conn.password)
        mask_secret(quote(conn.password))  # how the address carries it
    if not conn.host:
        raise InvalidConnection(f"connection {conn_id!r}: a {SPARK_CONNECT_CONN_TYPE} connection needs a host")
    try:
        url = SparkConnectHook(conn_id).get_connection_url()
    except ValueError:
        # the provider's message repeats the host, which may carry userinfo: name the field only
        raise InvalidConnection(
            f"connection {conn_id!r}: the host of a {SPARK_CONNECT_CONN_TYPE} connection cannot have a path"
        ) from None
    mask_secret(url)
    host = urlsplit(url.split(";", 1)[0]).hostname or ""
    if conn.password and "use_ssl=True" not in url and host != "localhost":
        # pyspark's client sends a token in the clear only to localhost; elsewhere it switches to TLS on its own, and
        # a server without TLS then looks unreachable for minutes while the client retries
        log.warning(
            "connection %r has a token but no use_ssl: the Spark Connect client talks TLS to %s regardless; "
            "if that server does not serve TLS, the session will not start",
            conn_id,
            host,
        )
    return url
