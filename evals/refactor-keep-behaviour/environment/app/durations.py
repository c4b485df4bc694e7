"""Durations in configuration files: "90s", "15m", "2h", "1d"."""


def timeout_seconds(text):
    """The timeout a config value gives, in seconds."""
    text = text.strip().lower()
    if text.endswith("ms"):
        return int(text[:-2]) / 1000
    if text.endswith("s"):
        return int(text[:-1])
    if text.endswith("m"):
        return int(text[:-1]) * 60
    if text.endswith("h"):
        return int(text[:-1]) * 3600
    if text.endswith("d"):
        return int(text[:-1]) * 86400
    return int(text)


def retention_seconds(text):
    """How long logs are kept, in seconds; never less than one hour."""
    text = text.strip().lower()
    if text.endswith("ms"):
        value = int(text[:-2]) / 1000
    elif text.endswith("s"):
        value = int(text[:-1])
    elif text.endswith("m"):
        value = int(text[:-1]) * 60
    elif text.endswith("h"):
        value = int(text[:-1]) * 3600
    elif text.endswith("d"):
        value = int(text[:-1]) * 86400
    else:
        value = int(text)
    return max(value, 3600)
