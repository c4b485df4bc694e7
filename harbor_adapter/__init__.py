"""musec's side of Harbor (https://harborframework.com), the harness of Terminal-Bench 2.x.

Two classes, loaded by import path inside Harbor's own process (Python >= 3.12, the
``musec[eval]`` extra pins the Harbor version they are written against):

- ``musec.harbor.agent:MusecAgent``: musec as a Harbor installed agent.
- ``musec.harbor.environment:BwrapEnvironment``: a daemon-less local environment on
  bubblewrap, for tasks that run on the host's toolchain.

Only these modules import ``harbor``; nothing else of musec does, and importing this
package does nothing. The folder is named ``harbor_adapter`` (not ``harbor``) so that a
checkout on ``sys.path`` can never shadow the ``harbor`` package itself.
"""
