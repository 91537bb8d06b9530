"""Starting or attaching to Ray, once per process.

Honours ``RAY_ADDRESS`` (a cluster); otherwise starts a local Ray with the
machine's cores. The JVM options RayDP needs on Java 17 are set on the job
config here, because a Ray job's JVM options can only be given at ``ray.init``.
"""
from __future__ import annotations

import logging
import os
import time

from engine.exceptions import ServiceError

#: --add-opens the Ray Java workers and RayDP's app master need on Java 17.
JAVA17_OPENS = [
    "--add-opens=java.base/java.lang=ALL-UNNAMED",
    "--add-opens=java.base/java.lang.invoke=ALL-UNNAMED",
    "--add-opens=java.base/java.lang.reflect=ALL-UNNAMED",
    "--add-opens=java.base/java.io=ALL-UNNAMED",
    "--add-opens=java.base/java.net=ALL-UNNAMED",
    "--add-opens=java.base/java.nio=ALL-UNNAMED",
    "--add-opens=java.base/java.util=ALL-UNNAMED",
    "--add-opens=java.base/java.util.concurrent=ALL-UNNAMED",
    "--add-opens=java.base/java.util.concurrent.atomic=ALL-UNNAMED",
    "--add-opens=java.base/sun.nio.ch=ALL-UNNAMED",
    "--add-opens=java.base/sun.nio.cs=ALL-UNNAMED",
    "--add-opens=java.base/sun.security.action=ALL-UNNAMED",
    "--add-opens=java.base/sun.util.calendar=ALL-UNNAMED",
]


def ensure_ray(num_cpus: int | None = None) -> float:
    """Start (or attach to) Ray if this process has not; returns the seconds it took."""
    import ray

    if ray.is_initialized():
        return 0.0
    started = time.perf_counter()
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")  # a local runtime on loopback
    job_config = ray.job_config.JobConfig(jvm_options=JAVA17_OPENS)
    try:
        if os.environ.get("RAY_ADDRESS"):
            ray.init(address=os.environ["RAY_ADDRESS"], job_config=job_config, logging_level=logging.WARNING)
        else:
            ray.init(
                num_cpus=num_cpus or os.cpu_count() or 1,
                include_dashboard=False,
                job_config=job_config,
                logging_level=logging.WARNING,
                configure_logging=True,
            )
    except Exception as exc:  # ray raises many types; the user needs one line
        raise ServiceError(f"could not start or reach Ray: {exc}") from exc
    return time.perf_counter() - started


def shutdown_ray() -> None:
    import ray

    if ray.is_initialized():
        ray.shutdown()
