"""The one root of toolmatrix's user-facing errors: ``ToolmatrixError`` carries the exit status its command
ends with (``exitcodes.CommandExit``), so a command raises where it finds the problem and the ``toolmatrix``
entry point alone prints it (one line, ``toolmatrix SUBCOMMAND: message``) and exits; the pytest plugin turns
the same errors into ``pytest.UsageError``."""

from __future__ import annotations

from toolmatrix.base.exitcodes import CommandExit


class ToolmatrixError(Exception):
    """A problem the user can fix, said in words that name what to change. ``status`` is the exit status of the
    command it stops: the class's own (a usage or input error unless a subclass says otherwise), or the one given."""

    status: int = CommandExit.USAGE

    def __init__(self, *args: object, status: int | None = None) -> None:
        super().__init__(*args)  # the arguments as each subclass has always taken them (a message, mostly)
        if status is not None:
            self.status = status
