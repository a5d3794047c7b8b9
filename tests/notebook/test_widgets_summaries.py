"""Value summaries sent to the widgets as text: dtype, shape, first values, bounded length."""

import numpy as np

from dflab.notebook._summaries import MAX_CHARS, summarize, summarize_outputs


def test_arrays_show_dtype_shape_and_first_values():
    assert summarize(np.arange(4.0).reshape(2, 2)) == "float64[2,2] [0, 1, 2, 3]"
    assert summarize(np.arange(10, dtype=np.int32)) == "int32[10] [0, 1, 2, 3, 4, 5, …]"
    assert summarize(np.float32(2.5)) == "float32 2.5"
    assert summarize(np.array([1.0, np.inf])).endswith("(has inf/nan)")


def test_dead_strings_and_multiple_outputs():
    assert summarize(None) == "dead"
    assert summarize(np.array(b"<b>x</b>")) == "string b'<b>x</b>'"
    assert summarize_outputs((np.int64(1), None)) == ":0 int64 1\n:1 dead"
    assert summarize_outputs(()) == "(no outputs)"


def test_long_text_is_cut():
    text = summarize(np.array(["x" * 1000]))
    assert len(text) == MAX_CHARS and text.endswith("…")
