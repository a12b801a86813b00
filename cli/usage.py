"""Usage errors of ``tnx`` and ``tnx-worker`` in the CLI's words (issue 37 item 6): one line
``error: <option>: <what is allowed>`` on stderr, exit 2
(:data:`~toolnexus_temporal.cli.options.EXIT_ENV`), never click's usage block.

Every typer ``Typer`` of the command line is built with :class:`OneLineGroup`
(:data:`~toolnexus_temporal.cli.appstyle.APP_SETTINGS`) and ``tnx-worker``'s one command is a
:class:`OneLineCommand`: both turn the usage errors raised while their arguments are parsed
and their command runs (a number out of its range or not a number, an unknown option or
command, a missing argument, a ``typer.BadParameter`` a command raises) into that line
(:func:`usage_line`). An option read from its environment variable is named by the variable.

click's exception classes are reached through ``typer.BadParameter``'s bases: the package
never imports ``click`` (``tests/unit/test_no_click.py``), and typer 0.2x vendors it.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, Final

import typer
from typer.core import TyperCommand, TyperGroup

from toolnexus_temporal.cli.hostcmd import fail_line
from toolnexus_temporal.cli.options import EXIT_ENV

USAGE_ERROR: Final[type[Exception]] = next(
    base for base in typer.BadParameter.__mro__ if base.__name__ == "UsageError"
)
"""click's ``UsageError`` (typer's vendored one, or click's with an older typer): the base of
every error :func:`usage_line` words."""


def _kinds(err: BaseException) -> set[str]:
    """The names of ``err``'s classes (``{"NoSuchOption", "UsageError", ...}``)."""
    return {base.__name__ for base in type(err).__mro__}


def _flag(param: Any) -> str:
    """How a parameter is typed: its first ``--long`` flag, else its first flag, an argument's
    metavar (``ID``)."""
    if getattr(param, "param_type_name", "") == "argument":
        return str(getattr(param, "metavar", None) or str(param.name).upper())
    opts = list(getattr(param, "opts", None) or [])
    long = [o for o in opts if o.startswith("--")]
    return str((long or opts or [f"--{str(param.name).replace('_', '-')}"])[0])


def _name(param: Any, ctx: Any) -> str:
    """The name a line gives ``param``: the environment variable its value came from, else
    :func:`_flag`."""
    source = ctx.get_parameter_source(param.name) if ctx is not None and param.name else None
    if getattr(source, "name", None) == "ENVIRONMENT":
        envvar = param.envvar
        names = [envvar] if isinstance(envvar, str) else list(envvar or [])
        for var in names:
            if os.environ.get(var):
                return str(var)
    return _flag(param)


def _hinted(err: Any, ctx: Any) -> Any:
    """The parameter of ``ctx``'s command that ``err``'s hint (``--store``) or option name
    names, None for none."""
    named = getattr(err, "param_hint", None) or getattr(err, "option_name", None)
    for candidate in ctx.command.params if ctx is not None else []:
        if named in (getattr(candidate, "opts", None) or []):
            return candidate
    return None


def _number(value: Any) -> str:
    """``0.1``, ``65535``: a bound as a person writes it."""
    return f"{value:g}" if isinstance(value, float) else str(value)


def allowed(param: Any) -> str | None:
    """What ``param`` takes, when its type says so: ``an integer from 1 to 65535``, ``a number
    of at least 0.1``, ``one of openai, anthropic``; None for anything else (text, paths)."""
    ptype = getattr(param, "type", None)
    descriptor = getattr(param, "type_descriptor", None)
    choices = getattr(descriptor, "choices", None) or getattr(ptype, "choices", None)
    if choices:
        return "one of " + ", ".join(str(getattr(c, "value", c)) for c in choices)
    annotation = getattr(descriptor, "annotation", None)
    type_name = str(getattr(ptype, "name", ""))
    if annotation is int or "integer" in type_name:
        kind = "an integer"
    elif annotation is float or "float" in type_name:
        kind = "a number"
    else:
        return None
    low = getattr(param, "min", None)
    high = getattr(param, "max", None)
    low = getattr(ptype, "min", None) if low is None else low
    high = getattr(ptype, "max", None) if high is None else high
    if low is not None and high is not None:
        return f"{kind} from {_number(low)} to {_number(high)}"
    if low is not None:
        return f"{kind} of at least {_number(low)}"
    if high is not None:
        return f"{kind} of at most {_number(high)}"
    return kind


def _given(err: BaseException) -> str:
    """``, got 0``: the rejected value when typer's check (a pydantic ``ValidationError``, not
    imported here: ``tnx --help`` loads no more than it needs) kept it."""
    errors = getattr(err.__cause__, "errors", None)
    found = errors() if callable(errors) else None
    return f", got {found[0].get('input')!s}" if found else ""


def _said(err: Any) -> str:
    """The error's own message on one line, without click's ``Invalid value for ...:``."""
    return " ".join(str(getattr(err, "message", "") or err).split())


def usage_line(err: Exception) -> str:
    """One usage error of click as the CLI says it: ``<option>: <what is allowed>`` (no
    ``error:``, no usage block; an unknown option or a missing one points to ``--help``)."""
    kinds = _kinds(err)
    ctx = getattr(err, "ctx", None)
    path = ctx.command_path if ctx is not None else ""
    see = f" (see {path} --help)" if path else ""
    param = getattr(err, "param", None)  # set by typer's own checks of a value
    if "NoSuchOption" in kinds:
        close = sorted(getattr(err, "possibilities", None) or [])
        hint = f" (did you mean {' or '.join(close)}?)" if close else see
        return f"{getattr(err, 'option_name', '')}: no such option of {path}{hint}"
    if "MissingParameter" in kinds and param is not None:
        takes = allowed(param)
        return f"{_flag(param)}: required" + (f", {takes}" if takes else "") + see
    if "BadOptionUsage" in kinds:  # raised by the parser, which knows no parameter
        named = getattr(err, "option_name", "")
        if "requires" in _said(err):
            return f"{named}: needs a value" + see
        if "does not take a value" in _said(err):
            return f"{named}: takes no value (a flag)"
        return f"{named}: {_said(err)}"
    if param is not None:
        takes = allowed(param)
        return f"{_name(param, ctx)}: " + (f"must be {takes}{_given(err)}" if takes else _said(err))
    hinted = _hinted(err, ctx)  # a command's own check: typer.BadParameter(param_hint="--x")
    if hinted is not None:
        return f"{_name(hinted, ctx)}: {_said(err)}"
    named = getattr(err, "param_hint", None)  # one no parameter has: --deployment-name/--build-id
    if named:
        return f"{named}: {_said(err)}"
    said = _said(err)
    if said.startswith("Got unexpected extra argument") and ctx is not None:
        extra = said.rsplit(" (", 1)[-1].removesuffix(")")  # "... argument(s) (b c)"
        usage = ctx.get_usage().removeprefix("Usage:").strip()
        return f"{extra}: unexpected argument (usage: {usage})"
    return f"{path}: {said}" if path else said


@contextmanager
def one_line_errors() -> Iterator[None]:
    """Turn a usage error raised inside into :func:`usage_line` on stderr and exit 2 (a
    ``typer.Exit``); ``no_args_is_help``'s help passes through."""
    try:
        yield
    except USAGE_ERROR as err:
        if "NoArgsIsHelpError" in _kinds(err):
            raise
        raise fail_line(usage_line(err), EXIT_ENV) from None


class _OneLine:
    """What a group and a command share: parsing and running with usage errors as one line
    (:func:`one_line_errors`); mixed in before click's class, whose methods ``super()`` calls."""

    def make_context(
        self, info_name: str | None, args: list[str], parent: Any = None, **extra: Any
    ) -> Any:
        """Parse ``args`` (click's), a usage error as one line."""
        with one_line_errors():
            return super().make_context(info_name, args, parent, **extra)  # type: ignore[misc]

    def invoke(self, ctx: Any) -> Any:
        """Run the command or subcommand (click's), a usage error as one line."""
        with one_line_errors():
            return super().invoke(ctx)  # type: ignore[misc]


class OneLineGroup(_OneLine, TyperGroup):
    """A typer group whose usage errors are one line (:func:`one_line_errors`); an unknown
    command is named with the commands there are."""

    def resolve_command(self, ctx: Any, args: list[str]) -> Any:
        """The subcommand ``args`` name (click's); one there is not is a usage error naming
        the commands there are."""
        name = args[0] if args else ""
        if name and not name.startswith("-") and self.get_command(ctx, name) is None:
            known = [n for n in self.list_commands(ctx) if not self.commands[n].hidden]
            raise typer.BadParameter(
                f"no such command of {ctx.command_path} (commands: {', '.join(known)})",
                ctx=ctx,
                param_hint=name,
            )
        return super().resolve_command(ctx, args)


class OneLineCommand(_OneLine, TyperCommand):
    """A typer command (an app of one command: ``tnx-worker``) whose usage errors are one
    line (:func:`one_line_errors`)."""
