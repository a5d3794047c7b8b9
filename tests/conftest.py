import pytest

import dflab as tf


@pytest.fixture(autouse=True)
def _fresh_default_graph():
    """Every test starts from an empty default graph."""
    tf.reset_default_graph()
    yield
