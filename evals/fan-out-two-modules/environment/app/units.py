"""Temperature units."""


def to_celsius(value, unit):
    raise NotImplementedError
