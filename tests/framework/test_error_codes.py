"""tf.errors' mapping between canonical error codes and exception classes."""

import pytest

import dflab as tf

_PAIRS = [
    (tf.errors.CANCELLED, tf.errors.CancelledError), (tf.errors.UNKNOWN, tf.errors.UnknownError),
    (tf.errors.INVALID_ARGUMENT, tf.errors.InvalidArgumentError),
    (tf.errors.DEADLINE_EXCEEDED, tf.errors.DeadlineExceededError),
    (tf.errors.NOT_FOUND, tf.errors.NotFoundError),
    (tf.errors.ALREADY_EXISTS, tf.errors.AlreadyExistsError),
    (tf.errors.PERMISSION_DENIED, tf.errors.PermissionDeniedError),
    (tf.errors.RESOURCE_EXHAUSTED, tf.errors.ResourceExhaustedError),
    (tf.errors.FAILED_PRECONDITION, tf.errors.FailedPreconditionError),
    (tf.errors.ABORTED, tf.errors.AbortedError),
    (tf.errors.OUT_OF_RANGE, tf.errors.OutOfRangeError),
    (tf.errors.UNIMPLEMENTED, tf.errors.UnimplementedError),
    (tf.errors.INTERNAL, tf.errors.InternalError),
    (tf.errors.UNAVAILABLE, tf.errors.UnavailableError),
    (tf.errors.DATA_LOSS, tf.errors.DataLossError),
    (tf.errors.UNAUTHENTICATED, tf.errors.UnauthenticatedError),
]


@pytest.mark.parametrize("code, cls", _PAIRS)
def test_code_and_class_map_both_ways(code, cls):
    assert tf.errors.exception_type_from_error_code(code) is cls
    assert tf.errors.error_code_from_exception_type(cls) == code
    assert cls(None, None, "m").error_code == code


def test_float_code_is_accepted_as_in_tf():
    assert tf.errors.exception_type_from_error_code(3.0) is tf.errors.InvalidArgumentError


@pytest.mark.parametrize("code", [tf.errors.OK, 17, -1])
def test_unknown_code_raises_key_error(code):
    with pytest.raises(KeyError):
        tf.errors.exception_type_from_error_code(code)


@pytest.mark.parametrize("cls", [tf.errors.OpError, ValueError, "NotFoundError", []])
def test_other_classes_warn_and_give_none(cls):
    with pytest.warns(UserWarning, match="Unknown class exception"):
        assert tf.errors.error_code_from_exception_type(cls) is None
