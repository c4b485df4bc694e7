"""Split a list into pages."""


def page(items, number, size):
    """The items on page ``number`` (counted from 1) when pages hold ``size`` items."""
    if number < 1 or size < 1:
        raise ValueError("page number and size start at 1")
    start = number * size
    return items[start : start + size]


def page_count(items, size):
    """How many pages ``items`` fill."""
    return -(-len(items) // size)
