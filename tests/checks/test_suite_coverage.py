"""Every suite factory of ``checks/suites.py`` is exported and has tests in this package.

A new suite must be added to ``suites.__all__``, get a passing and a failing frame in ``test_mixed_suites.py``,
``test_kl_suites.py`` or ``test_sharded_gates.py``, and be listed here.
"""

from __future__ import annotations

import inspect

from checks import suites

#: Suites of the ten gates of the mixed and Rating models (tested in test_mixed_suites.py; the utility suite serves
#: the (k, ℓ) model's utility gate too; the per-attribute one of gate 2 in tests/core/test_per_attribute_ell.py).
MIXED_MODEL_SUITES = {
    "sac_diversity_suite",
    "sid_diversity_suite",
    "sid_diversity_per_attribute_suite",
    "disclosure_suite",
    "confidence_suite",
    "accounting_suite",
    "no_probability_tilt_suite",
    "no_input_order_suite",
    "no_certain_cell_suite",
    "posterior_suite",
    "utility_suite",
}
#: Suites of the three (k, ℓ) gates (tested in test_kl_suites.py).
KL_SUITES = {"kl_equivalence_class_suite", "kl_diversity_suite", "kl_accounting_suite"}
#: Suites of a sharded release's gates on its S-row summary frame and reduced figures (tested in test_sharded_gates.py).
SHARDED_SUITES = {"shard_summary_suite", "shard_accounting_suite", "reduced_gate_suite"}


def test_every_suite_factory_is_exported_and_tested():
    defined = {
        name for name, function in inspect.getmembers(suites, inspect.isfunction) if function.__module__ == suites.__name__
    }
    assert defined == set(suites.__all__)
    assert defined == MIXED_MODEL_SUITES | KL_SUITES | SHARDED_SUITES
