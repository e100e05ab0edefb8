"""The one exception type for problems in what a user gave us, and the warnings methods emit.

Every message names the problem and what to do about it, so the CLI can print it and the app can show it
as-is. Internal bugs keep raising ordinary exceptions.
"""


class UserInputError(ValueError):
    """Raised when user-supplied data, columns or parameters cannot be used; the message is for people."""


class AggregationWarning(UserWarning):
    """Raised (as a warning) when a method's assumptions fail but a result can still be returned."""


class ConvergenceWarning(AggregationWarning):
    """An iterative fit stopped at its iteration limit before meeting its convergence rule."""
