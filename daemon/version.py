"""musec's version, in a module that imports nothing (the client reads it for --version)."""

VERSION = "0.1.0"
