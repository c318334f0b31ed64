"""The Great Expectations warm-up of the sharded job's driver (issue 18): a thread that imports GX and creates the
context while the shards are released must leave exactly one context, shared with the gates that validate meanwhile."""

import pandas as pd

from checks import gx_runner, suites


def test_a_gate_validating_during_the_warm_up_shares_its_one_context():
    gx_runner._new_context.cache_clear()
    thread = gx_runner.warm_up_in_background()
    outcome = gx_runner.validate_frame(pd.DataFrame({"passed": [False]}), suites.reduced_gate_suite("disclosure_within_bound"))
    thread.join(timeout=120)
    assert not thread.is_alive()
    assert outcome.success is False  # the suite really ran on the frame
    info = gx_runner._new_context.cache_info()
    assert (info.misses, info.currsize) == (1, 1)  # one context, created once, whichever thread came first
