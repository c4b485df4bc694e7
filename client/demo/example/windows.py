"""Sliding windows over a sequence."""


def windows(items, size):
    """Every run of ``size`` consecutive items, in order.

    >>> windows([1, 2, 3], 2)
    [[1, 2], [2, 3]]
    """
    if size <= 0:
        raise ValueError("size must be positive")
    return [list(items[i : i + size]) for i in range(len(items) - size)]
