import pytest

import dflab as tf


@pytest.fixture(autouse=True)
def _fresh_default_graph():
    """Every test starts from an empty default graph."""
    tf.reset_default_graph()
    yield


@pytest.fixture(autouse=True)
def _default_variable_kind_restored():
    """A test that switches the default variable kind (``disable_v2_behavior``,
    ``disable_resource_variables``) does not change it for the tests after it."""
    before = tf.resource_variables_enabled()
    yield
    (tf.enable_resource_variables if before else tf.disable_resource_variables)()
