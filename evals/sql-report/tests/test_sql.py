import sys
import unittest

sys.path.insert(0, "/app")
import sqlite3  # noqa: E402


class HiddenTest(unittest.TestCase):
    def test_report(self):
        db = sqlite3.connect(":memory:")
        db.executescript(open("/app/schema.sql").read())
        db.executemany("INSERT INTO customers VALUES (?, ?)", [(1, "ann"), (2, "bob"), (3, "cy"), (4, "dee")])
        db.executemany("INSERT INTO orders (customer_id, amount, status) VALUES (?, ?, ?)", [
            (1, 10, "paid"), (1, 5, "refunded"), (2, 7, "paid"), (2, 8, "paid"), (3, 99, "open"), (4, 15, "paid")])
        cur = db.execute(open("/app/report.sql").read())
        self.assertEqual([d[0] for d in cur.description], ["name", "total"])
        self.assertEqual(cur.fetchall(), [("bob", 15.0), ("dee", 15.0), ("ann", 10.0)])


if __name__ == "__main__":
    unittest.main()
