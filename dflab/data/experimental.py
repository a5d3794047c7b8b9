"""``tf.data.experimental``: what TF 1.x programs use from it."""

from dflab.data.dataset import AUTOTUNE, INFINITE_CARDINALITY, UNKNOWN_CARDINALITY, Dataset


def cardinality(dataset: Dataset):
    """``dataset.cardinality()``: its number of elements as an int64 scalar computed when run,
    ``INFINITE_CARDINALITY`` or ``UNKNOWN_CARDINALITY``."""
    return dataset.cardinality()


def unbatch():
    """``Dataset.unbatch`` for ``Dataset.apply``."""
    return lambda dataset: dataset.unbatch()


def parallel_interleave(map_func, cycle_length, block_length=1, sloppy=False,
                        buffer_output_elements=None, prefetch_input_elements=None):
    """``Dataset.interleave`` for ``Dataset.apply``, in TF's deterministic order (as TF's with
    ``sloppy=False``; dflab's order is the same with ``sloppy=True``); the buffer sizes are
    accepted and change nothing."""
    return lambda dataset: dataset.interleave(map_func, cycle_length, block_length)


__all__ = ["AUTOTUNE", "INFINITE_CARDINALITY", "UNKNOWN_CARDINALITY", "cardinality",
           "parallel_interleave", "unbatch"]
