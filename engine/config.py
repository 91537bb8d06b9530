"""Configuration from the environment, read in one place.

Every environment variable Metastore reads is declared in :data:`VARIABLES` and
read through :func:`get` (a test checks that no other module reads one, and that
docs/CONFIGURATION.md lists each). Command-line options win over variables;
variables win over defaults.
"""

from __future__ import annotations

import os
from dataclasses import dataclass


@dataclass(frozen=True)
class Variable:
    name: str
    meaning: str
    default: str = ""


STORE = Variable("METASTORE_STORE", "the statistics store of the CLI (a directory or an s3:// prefix); `--store` wins", ".metastore")
FLIGHT = Variable("METASTORE_FLIGHT", "the Flight server `metastore query` talks to; `--server` wins", "grpc://127.0.0.1:8815")
FLIGHT_TOKEN = Variable(
    "METASTORE_FLIGHT_TOKEN", "the bearer token of `metastore serve` and `metastore query` (safer than `--token`, which `ps` shows)"
)
REDIS_URL = Variable(
    "REDIS_URL",
    "an existing Redis for `--frequencies redis` when `--redis` is not given (else the job starts a private redis-server); redis:// or rediss:// with password and TLS in the URL (docs/FREQUENCIES.md)",
)
REDIS_SERVER = Variable("METASTORE_REDIS_SERVER", "the redis-server binary to start (else found on PATH)")
RAY_ADDRESS = Variable("RAY_ADDRESS", "a Ray cluster to attach to (else a local Ray starts in the process)")
RUNTIME = Variable(
    "METASTORE_RUNTIME",
    "where analyze and exact quantiles run: `ray`, `local` (this process, no Ray) or `auto` (this process for a small table, docs/SCALING.md); `--runtime` wins",
    "auto",
)
AWS_ENDPOINT_URL_S3 = Variable("AWS_ENDPOINT_URL_S3", "an S3-compatible endpoint for s3:// locations (also AWS_ENDPOINT_URL)")
AWS_ENDPOINT_URL = Variable("AWS_ENDPOINT_URL", "the endpoint of every AWS service, S3 included, when AWS_ENDPOINT_URL_S3 is unset")
AWS_REGION = Variable("AWS_REGION", "the S3 region (also AWS_DEFAULT_REGION); us-east-1 with a custom endpoint")
AWS_DEFAULT_REGION = Variable("AWS_DEFAULT_REGION", "the S3 region when AWS_REGION is unset")
AWS_ACCESS_KEY_ID = Variable("AWS_ACCESS_KEY_ID", "S3 credentials, with AWS_SECRET_ACCESS_KEY (else the SDK's credential chain)")
AWS_SECRET_ACCESS_KEY = Variable("AWS_SECRET_ACCESS_KEY", "S3 credentials, with AWS_ACCESS_KEY_ID")
AWS_SESSION_TOKEN = Variable("AWS_SESSION_TOKEN", "a temporary S3 credential's token")

VARIABLES: tuple[Variable, ...] = (
    STORE,
    FLIGHT,
    FLIGHT_TOKEN,
    REDIS_URL,
    REDIS_SERVER,
    RAY_ADDRESS,
    RUNTIME,
    AWS_ENDPOINT_URL_S3,
    AWS_ENDPOINT_URL,
    AWS_REGION,
    AWS_DEFAULT_REGION,
    AWS_ACCESS_KEY_ID,
    AWS_SECRET_ACCESS_KEY,
    AWS_SESSION_TOKEN,
)
#: variables that are forwarded to Ray tasks (object-store settings must reach workers
#: started before the driver set them, or on other nodes of a cluster)
FORWARDED_PREFIXES = ("AWS_",)


def get(*variables: Variable) -> str | None:
    """The first of ``variables`` that is set to a non-blank value (read now: tests and
    long-running servers see a changed environment)."""
    for v in variables:
        value = os.environ.get(v.name, "").strip()
        if value:
            return value
    return None


def forwarded() -> dict[str, str]:
    """The variables a driver forwards to its Ray tasks."""
    return {k: v for k, v in os.environ.items() if k.startswith(FORWARDED_PREFIXES)}
