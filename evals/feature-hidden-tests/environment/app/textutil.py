"""Text helpers."""


def slugify(text, max_length=None):
    raise NotImplementedError
