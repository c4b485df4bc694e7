import sys
import unittest

sys.path.insert(0, "/app")
from textutil import slugify  # noqa: E402


class SlugifyTest(unittest.TestCase):
    def test_accents(self):
        self.assertEqual(slugify("Crème brûlée"), "creme-brulee")

    def test_punctuation_and_spaces(self):
        self.assertEqual(slugify("  Hello,  World!! "), "hello-world")

    def test_digits(self):
        self.assertEqual(slugify("Python 3.12 release"), "python-3-12-release")

    def test_non_ascii_removed(self):
        self.assertEqual(slugify("naïve café ☕ time"), "naive-cafe-time")

    def test_max_length_word_boundary(self):
        self.assertEqual(slugify("alpha beta gamma", 12), "alpha-beta")
        self.assertEqual(slugify("alpha beta gamma", 10), "alpha-beta")
        self.assertEqual(slugify("alpha beta gamma", 100), "alpha-beta-gamma")

    def test_empty(self):
        self.assertEqual(slugify(""), "")
        self.assertEqual(slugify("!!!", 5), "")


if __name__ == "__main__":
    unittest.main()
