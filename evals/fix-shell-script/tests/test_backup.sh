#!/bin/bash
set -e
work=$(mktemp -d)
mkdir -p "$work/in dir"
echo one > "$work/in dir/a file.txt"
echo two > "$work/in dir/b.txt"
echo skip > "$work/in dir/c.log"
bash /app/backup.sh "$work/in dir" "$work/out dir"
test "$(cat "$work/out dir/a file.txt")" = one
test "$(cat "$work/out dir/b.txt")" = two
test ! -e "$work/out dir/c.log"
