"""Count words."""


def count_words(text):
    """How many words ``text`` holds (separated by any whitespace)."""
    return len(text.split(" "))
