#!/bin/bash
set -e
cd /app
cat > report.sql <<'EOF'
SELECT c.name AS name, SUM(o.amount) AS total
FROM customers AS c JOIN orders AS o ON o.customer_id = c.id
WHERE o.status = 'paid'
GROUP BY c.id
ORDER BY total DESC, name;
EOF
