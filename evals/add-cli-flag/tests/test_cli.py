import sys
import unittest

sys.path.insert(0, "/app")
import subprocess  # noqa: E402


class HiddenTest(unittest.TestCase):
    def todo(self, *args):
        return subprocess.run([sys.executable, "/app/todo.py", "list", *args], capture_output=True, text=True)

    def test_filters(self):
        import json
        import tempfile
        path = tempfile.mktemp(suffix=".json")
        json.dump([{"title": "a", "done": True}, {"title": "b", "done": False}, {"title": "c", "done": True}], open(path, "w"))
        self.assertEqual(self.todo(path).stdout, "[x] a\n[ ] b\n[x] c\n")
        self.assertEqual(self.todo("--done", path).stdout, "[x] a\n[x] c\n")
        self.assertEqual(self.todo(path, "--open").stdout, "[ ] b\n")
        self.assertEqual(self.todo("--done", "--open", path).returncode, 2)


if __name__ == "__main__":
    unittest.main()
