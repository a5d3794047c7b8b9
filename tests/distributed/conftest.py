import pytest

# Ray's raylet gives its agents a fixed 15 s to start; on a loaded two-core machine they may
# take longer and the start fails as a whole ("timed out during startup"). Starting again is
# safe: nothing of the failed attempt is used.
START_ATTEMPTS = 3


@pytest.fixture(scope="module")
def ray_instance():
    """A local Ray instance, started by the first module that needs one and kept for the
    others: CPU only, no dashboard, a small object store (CI runs on two cores). A module that
    runs its own multi-node cluster shuts it down; the next module starts it again."""
    import ray

    if ray.is_initialized():
        yield ray
        return
    for attempt in range(START_ATTEMPTS):
        try:
            ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False,
                     object_store_memory=256 * 1024 * 1024, configure_logging=False)
            break
        except Exception as e:  # noqa: BLE001 - Ray raises a bare Exception here
            ray.shutdown()
            if "timed out during startup" not in str(e) or attempt + 1 == START_ATTEMPTS:
                raise
    yield ray
