"""Shared pytest fixtures.

Each fixture is self-contained (its own imports and clean-up) so fixtures can be
added here independently.
"""
from __future__ import annotations

from collections.abc import Iterator

import pytest


@pytest.fixture(scope="session")
def s3_server() -> Iterator[str]:
    """An S3-compatible server (moto, in-process) with an empty bucket named ``bucket``.

    For the whole session the standard AWS environment variables point at it, so
    anything that configures S3 from the environment (engine.fileio, boto3) talks
    to it. Yields the endpoint URL (``http://127.0.0.1:<port>``).
    """
    import boto3
    from moto.server import ThreadedMotoServer

    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    endpoint = f"http://{host}:{port}"
    try:
        with pytest.MonkeyPatch.context() as mp:
            for name in ("AWS_ENDPOINT_URL_S3", "AWS_SESSION_TOKEN", "AWS_PROFILE", "AWS_REGION"):
                mp.delenv(name, raising=False)
            mp.setenv("AWS_ENDPOINT_URL", endpoint)
            mp.setenv("AWS_ACCESS_KEY_ID", "testing")
            mp.setenv("AWS_SECRET_ACCESS_KEY", "testing")
            mp.setenv("AWS_DEFAULT_REGION", "us-east-1")
            boto3.client("s3", endpoint_url=endpoint).create_bucket(Bucket="bucket")
            yield endpoint
    finally:
        server.stop()
