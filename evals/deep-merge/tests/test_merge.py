import sys
import unittest

sys.path.insert(0, "/app")
import copy  # noqa: E402

from layers import deep_merge  # noqa: E402


class HiddenTest(unittest.TestCase):
    def test_merge(self):
        base = {"a": 1, "db": {"host": "x", "port": 1, "opts": {"ssl": True}}, "tags": [1, 2], "gone": 5}
        over = {"db": {"port": 2, "opts": {"timeout": 3}}, "tags": [3], "gone": None, "new": {"k": 1}}
        b0, o0 = copy.deepcopy(base), copy.deepcopy(over)
        self.assertEqual(deep_merge(base, over), {"a": 1, "db": {"host": "x", "port": 2, "opts": {"ssl": True, "timeout": 3}},
                                                  "tags": [3], "new": {"k": 1}})
        self.assertEqual((base, over), (b0, o0))

    def test_not_aliased(self):
        base = {"db": {"host": "x"}}
        merged = deep_merge(base, {})
        merged["db"]["host"] = "y"
        self.assertEqual(base["db"]["host"], "x")


if __name__ == "__main__":
    unittest.main()
