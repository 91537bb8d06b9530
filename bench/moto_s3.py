"""An S3-compatible server on loopback for the benchmarks (moto, in the benchmark's own process)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def moto_s3(bucket: str = "bench") -> Iterator[str]:
    """Start moto with an empty ``bucket``, point the AWS environment (engine.fileio, boto3) at
    it, and yield its endpoint URL; stopped on exit. Every request is a round trip through
    moto's Python server: count requests there, and take its times as moto's, not S3's."""
    import boto3
    from moto.server import ThreadedMotoServer

    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    endpoint = f"http://{host}:{port}"
    os.environ.update(AWS_ENDPOINT_URL=endpoint, AWS_ACCESS_KEY_ID="bench", AWS_SECRET_ACCESS_KEY="bench", AWS_DEFAULT_REGION="us-east-1")
    try:
        boto3.client("s3", endpoint_url=endpoint).create_bucket(Bucket=bucket)
        yield endpoint
    finally:
        server.stop()
