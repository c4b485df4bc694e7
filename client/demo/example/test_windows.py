import unittest

from windows import windows


class WindowsTest(unittest.TestCase):
    def test_pairs(self):
        self.assertEqual(windows([1, 2, 3], 2), [[1, 2], [2, 3]])

    def test_whole_sequence_is_one_window(self):
        self.assertEqual(windows("abc", 3), [["a", "b", "c"]])

    def test_window_longer_than_items(self):
        self.assertEqual(windows([1, 2], 3), [])

    def test_size_must_be_positive(self):
        with self.assertRaises(ValueError):
            windows([1], 0)


if __name__ == "__main__":
    unittest.main()
