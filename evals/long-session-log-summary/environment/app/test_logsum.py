import unittest

from logsum import format_table, parse_line, summarize

LOG = ["GET /a 200 10", "GET /b 500 5", "garbage", "POST /a 201 7", "GET /b 200 1", "GET /a 503 0"]


class LogTest(unittest.TestCase):
    def test_parse(self):
        self.assertEqual(parse_line("GET /a 200 10"), ("/a", 200, 10))
        self.assertIsNone(parse_line("GET /a two 10"))

    def test_summarize(self):
        self.assertEqual(summarize(LOG)["/a"], {"requests": 3, "errors": 1, "bytes": 17})

    def test_table(self):
        self.assertEqual(format_table(summarize(LOG)), "/a 3 1 17\n/b 2 1 6")


if __name__ == "__main__":
    unittest.main()
