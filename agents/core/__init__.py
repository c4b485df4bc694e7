"""The agents' core: what every layer shares and nothing of musec below it.

- ``conversation``: the provider-neutral conversation types (blocks, messages, requests).
- ``errors``: the agent layer's errors, named by condition.
- ``events``: the session log's event types, their line format and persistence policy.
- ``faults``: the crash points of the restart tests.

Providers and tools import only this package of ``musec.agents``; this package imports
nothing else of musec. Importing it does no work: import the module you need.
"""
