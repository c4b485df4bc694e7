import unittest

from wordcount import count_words


class CountTest(unittest.TestCase):
    def test_spaces(self):
        self.assertEqual(count_words("a  b\tc\nd"), 4)


if __name__ == "__main__":
    unittest.main()
