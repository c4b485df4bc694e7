import sys
import unittest

sys.path.insert(0, "/app")
from versions import parse_version  # noqa: E402


class HiddenTest(unittest.TestCase):
    def test_parse(self):
        self.assertEqual(parse_version("1.2.10"), (1, 2, 10))
        self.assertLess(parse_version("1.2.9"), parse_version("1.2.10"))

    def test_only_loopback(self):
        import socket
        self.assertEqual([name for _, name in socket.if_nameindex()], ["lo"], "the environment has a network")


if __name__ == "__main__":
    unittest.main()
