"""Configuration layering."""


def deep_merge(base, override):
    raise NotImplementedError
