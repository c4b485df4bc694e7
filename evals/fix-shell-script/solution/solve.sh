#!/bin/bash
set -e
cd /app
cat > backup.sh <<'EOF'
#!/bin/bash
# Usage: backup.sh SRC DEST -- copy SRC/*.txt into DEST (created if missing).
set -e
src=$1
dest=$2
mkdir -p "$dest"
for f in "$src"/*.txt; do
  [ -e "$f" ] || continue
  cp "$f" "$dest/"
done
EOF
