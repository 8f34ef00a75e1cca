"""The one exception type the CLI turns into a single stderr line and exit code 2."""


class UserError(Exception):
    """Bad input or an unusable environment: the message says what is wrong and what to do."""
