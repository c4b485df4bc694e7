#!/bin/bash
set -e
cd /app
sed -i 's/    start = number \* size/    start = (number - 1) * size/' pager.py
python3 -m unittest -q
