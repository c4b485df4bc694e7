import unittest

from stats import median
from units import to_celsius


class StatsTest(unittest.TestCase):
    def test_median(self):
        self.assertEqual(median([5, 1, 3]), 3)


class UnitsTest(unittest.TestCase):
    def test_fahrenheit(self):
        self.assertAlmostEqual(to_celsius(50, "F"), 10)


if __name__ == "__main__":
    unittest.main()
