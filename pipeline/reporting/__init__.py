"""Human-readable reports (framework-free: no Dagster, no Great Expectations).

``release_report``: report.html / report.json of a release; ``attack_report``: ``make attacks``;
``experiments_report``: REPORT.md of the P1 experiments; ``figures``: their plots (matplotlib); ``templates/``.
"""
