import sys
import unittest

sys.path.insert(0, "/app")
from logsum import format_table, parse_line, summarize  # noqa: E402


class HiddenTest(unittest.TestCase):
    def test_edge_cases(self):
        self.assertIsNone(parse_line(""))
        self.assertIsNone(parse_line("GET /a 200"))
        self.assertEqual(summarize([]), {})
        self.assertEqual(format_table(summarize(["GET /b 200 1", "GET /a 200 1"])), "/a 1 0 1\n/b 1 0 1")
        self.assertEqual(summarize(["GET /a 599 0", "GET /a 499 0"])["/a"]["errors"], 1)


if __name__ == "__main__":
    unittest.main()
