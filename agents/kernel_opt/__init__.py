"""The kernel-optimisation agent: campaign specs, candidate evaluation, leaderboard, kept commits.

Modules (DESIGN.md section 10; importing this package does no work and imports no torch):
    spec -- ``kernel-task.toml`` parsing and the shipped specs (``kda``, ``mla-decode``,
        ``cpu-example``).
    guard -- forbidden imports: found in the source before running, blocked at import time.
    evaluate -- ``evaluate_kernel``: a separate process with a timeout (``child``) checks the
        candidate on every shape and times it against the baseline (``measure``).
    profile -- ``profile_kernel``: the profiler's key figures, or a plain "no profiler".
    leaderboard -- the fold of evaluations into a leaderboard, its CSV and PNG plot.
    keep -- a commit per improvement on the campaign's branch (pygit2).
    campaign -- ties them together for one campaign directory.
"""
