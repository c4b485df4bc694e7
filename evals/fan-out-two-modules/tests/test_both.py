import sys
import unittest

sys.path.insert(0, "/app")
from stats import median  # noqa: E402
from units import to_celsius  # noqa: E402


class HiddenTest(unittest.TestCase):
    def test_median(self):
        self.assertEqual(median([3, 1, 2]), 2)
        self.assertEqual(median([4, 1, 3, 2]), 2.5)
        with self.assertRaises(ValueError):
            median([])

    def test_celsius(self):
        self.assertAlmostEqual(to_celsius(212, "F"), 100)
        self.assertAlmostEqual(to_celsius(0, "k"), -273.15)
        self.assertEqual(to_celsius(21, "c"), 21.0)
        for bad in (("x", 1), ("K", -1)):
            with self.assertRaises(ValueError):
                to_celsius(bad[1], bad[0])


if __name__ == "__main__":
    unittest.main()
