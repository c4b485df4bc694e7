"""Version strings."""


def parse_version(text):
    """``"1.2.10"`` as a tuple that sorts in version order."""
    return tuple(text.strip().split("."))
