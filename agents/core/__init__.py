"""The agents' core: what every layer shares and nothing of musec below it.

- ``conversation``: the provider-neutral conversation types (blocks, messages, requests).
- ``errors``: the agent layer's errors, named by condition.
- ``events``: the session log's event types, their line format and persistence policy.
- ``faults``: the crash points of the restart tests, injected as a ``Faults`` object.
- ``words``: counts with their nouns (``1 turn``, ``2 turns``) for what people read.

Providers and tools import only this package of ``musec.agents``; this package imports
nothing else of musec. Importing it does no work: import the module you need.
"""
