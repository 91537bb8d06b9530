"""The local Ray runtime as ensure_ray starts it (the session's runtime, tests/conftest.py)."""
from __future__ import annotations

import os

import ray

from engine.runtime import ray_runtime as runtime_module


def test_local_workers_inherit_the_allocator_settings(ray_runtime):
    """Workers keep their heap (no mimalloc purge) unless the user set the variable."""

    @ray.remote(num_cpus=1)
    def seen() -> dict[str, str | None]:
        return {name: os.environ.get(name) for name in runtime_module.WORKER_ALLOCATOR_ENV}

    if os.environ.get("RAY_ADDRESS"):
        return  # a cluster's workers inherit nothing from this process
    got = ray.get(seen.remote())
    for name, default in runtime_module.WORKER_ALLOCATOR_ENV.items():
        assert got[name] == (runtime_module._worker_environment or {}).get(name, default)
        assert got[name] is not None
