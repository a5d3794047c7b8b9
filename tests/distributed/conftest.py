import pytest


@pytest.fixture(scope="session")
def ray_instance():
    """One local Ray instance for the whole test run: CPU only, no dashboard, a small object
    store (CI runs on two cores)."""
    import ray

    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False,
             object_store_memory=256 * 1024 * 1024, configure_logging=False)
    yield ray
    ray.shutdown()
