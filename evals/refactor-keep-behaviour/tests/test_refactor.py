import ast
import sys
import unittest

sys.path.insert(0, "/app")
sys.path.insert(0, "/tests")
import durations  # noqa: E402
import original  # noqa: E402

CASES = ["90s", "15m", "2h", "1d", "250ms", "42", " 3H ", "0s", "5d", "7200", "1500ms"]
BAD = ["", "abc", "12x", "m", "1.5h"]


class RefactorTest(unittest.TestCase):
    def test_same_values(self):
        for case in CASES:
            for name in ("timeout_seconds", "retention_seconds"):
                self.assertEqual(getattr(durations, name)(case), getattr(original, name)(case), (name, case))

    def test_same_errors(self):
        for case in BAD:
            for name in ("timeout_seconds", "retention_seconds"):
                with self.assertRaises(ValueError):
                    getattr(original, name)(case)
                with self.assertRaises(ValueError, msg=(name, case)):
                    getattr(durations, name)(case)

    def test_one_parser(self):
        tree = ast.parse(open("/app/durations.py").read())
        funcs = {f.name: f for f in tree.body if isinstance(f, ast.FunctionDef)}
        self.assertIn("parse_duration", funcs)
        for name in ("timeout_seconds", "retention_seconds"):
            calls = {c.func.id for c in ast.walk(funcs[name]) if isinstance(c, ast.Call) and isinstance(c.func, ast.Name)}
            self.assertIn("parse_duration", calls, name)
            self.assertNotIn("endswith", ast.unparse(funcs[name]), name)


if __name__ == "__main__":
    unittest.main()
