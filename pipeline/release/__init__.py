"""The release directory and its safety (framework-free: no Dagster, no Great Expectations).

``publish``: the release contract and the atomic, crash-safe publish; ``promotion``: shared release or comparison; ``locking``: one release at a time per
home; ``failpoints``: fault injection for the crash tests; ``home_secret``: the private key of a home;
``registry``: released-record fingerprints and the recomposition refusal; ``audit``: audit a published release
directory from its files alone.
"""
