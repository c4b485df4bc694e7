#!/bin/bash
# Hidden tests and the task's own tests; reward 1 only when both pass.
cd /app
if python3 -m unittest -q test_pager 2>&1 && python3 /tests/test_hidden.py 2>&1; then
  echo 1 > /logs/verifier/reward.txt
else
  echo 0 > /logs/verifier/reward.txt
fi
