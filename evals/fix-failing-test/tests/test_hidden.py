import sys
import unittest

sys.path.insert(0, "/app")
from pager import page, page_count  # noqa: E402


class HiddenPageTest(unittest.TestCase):
    def test_every_page(self):
        items = list(range(10))
        pages = [page(items, n, 3) for n in range(1, page_count(items, 3) + 1)]
        self.assertEqual(pages, [[0, 1, 2], [3, 4, 5], [6, 7, 8], [9]])

    def test_past_the_end(self):
        self.assertEqual(page(list(range(10)), 5, 3), [])

    def test_bad_number(self):
        with self.assertRaises(ValueError):
            page([1], 0, 3)


if __name__ == "__main__":
    unittest.main()
