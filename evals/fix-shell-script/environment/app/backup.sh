#!/bin/bash
# Usage: backup.sh SRC DEST -- copy SRC/*.txt into DEST (created if missing).
set -e
src=$1
dest=$2
mkdir -p $dest
for f in $(ls $src/*.txt); do
  cp $f $dest/
done
