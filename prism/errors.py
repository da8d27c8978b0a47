"""The base of every error PRISM reports to a person as one clear paragraph instead of a traceback."""


class PrismError(Exception):
    """An input, file or service PRISM cannot use as it is; the message says what and how to fix it."""


class ConfigError(PrismError, ValueError):
    """A composed config value Hydra's type check lets through but PRISM cannot run with (e.g. a size of 0)."""


class DataError(PrismError, ValueError):
    """A dataset could not be loaded or a frozen set could not be trusted; the message says why."""
