"""Fixtures of the frequency tests."""

from __future__ import annotations

import pytest
import ray

from engine.frequencies.job import start_coordinator


@pytest.fixture(scope="module")
def coordinator(ray_runtime: None):
    """One coordinator actor (with its own redis-server) per test module."""
    actor = start_coordinator()
    yield actor
    ray.get(actor.shutdown.remote())
    ray.kill(actor)
