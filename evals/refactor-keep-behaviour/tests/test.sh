#!/bin/bash
# Hidden tests (only in tests/, run after the agent): reward 1 when they all pass.
cd /app
if python3 /tests/test_refactor.py 2>&1; then
  echo 1 > /logs/verifier/reward.txt
else
  echo 0 > /logs/verifier/reward.txt
fi
