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


def test_local_workers_reuse_freed_numpy_memory(ray_runtime):
    """The glibc settings take effect: a second 128 MiB array costs no fresh pages
    (without them each costs ~580 page faults here, huge pages included)."""

    @ray.remote(num_cpus=1)
    def faults() -> tuple[int, int]:
        import resource

        import numpy as np

        out = []
        for _ in range(2):
            before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
            a = np.ones(16 << 20)  # 128 MiB, every page written
            out.append(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
            del a
        return out[0], out[1]

    if (
        os.environ.get("RAY_ADDRESS")
        or "GLIBC_TUNABLES" in (runtime_module._worker_environment or {})
        and (runtime_module._worker_environment["GLIBC_TUNABLES"] != runtime_module.WORKER_ALLOCATOR_ENV["GLIBC_TUNABLES"])
    ):
        return  # a cluster, or the user chose other settings
    first, second = ray.get(faults.remote())
    assert second < 64, (first, second)
