"""docs/compat.md's list of TF 1.x names dflab lacks is exactly what is missing now."""

import surface


def test_the_missing_names_in_docs_compat_are_current():
    assert surface.current_section() == surface.generated_section(), (
        "docs/compat.md's list of missing TF names is stale: run "
        "`python tests/compat/surface.py --write`")


def test_the_names_classic_programs_use_most_are_present():
    missing = surface.missing_names()
    for module, name in [("tf", "Session"), ("tf", "placeholder"), ("nn", "conv2d"),
                         ("train", "AdamOptimizer"), ("math", "reduce_sum"),
                         ("logging", "set_verbosity"), ("gfile", "Exists"),
                         ("nn.rnn_cell", "LSTMCell"), ("layers", "dense")]:
        assert name not in missing.get(module, []), (module, name)
