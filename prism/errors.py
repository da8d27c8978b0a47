"""The base of every error PRISM reports to a person as one clear paragraph instead of a traceback."""


class PrismError(Exception):
    """An input, file or service PRISM cannot use as it is; the message says what and how to fix it."""
