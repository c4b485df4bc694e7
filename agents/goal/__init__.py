"""Goals (issue 14 ``/goal``): work until a checked condition holds.

``spec`` parses ``/goal`` and holds a goal's settings; ``state`` is the fold of the goal
events into a session's goal and its counters; ``judge`` the workspace's state, the check
command and the evaluator's verdict; ``texts`` what the agents are told; ``driver`` the
loop that judges each turn and ends or pauses the goal.
"""

from .spec import GoalSpec, GoalUsageError, make_spec, parse_goal_command
from .state import ENDED, EVALUATOR, GoalState

__all__ = ["ENDED", "EVALUATOR", "GoalSpec", "GoalState", "GoalUsageError", "make_spec", "parse_goal_command"]
