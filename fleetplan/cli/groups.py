"""Command groups: subcommands imported on first use, a default command, and old names kept for a release.

``LazyGroup`` imports a subcommand's module only when that subcommand runs; ``--help`` of the group
lists the commands not yet imported from their registered summaries (``summaries``), so it imports
none of them.  ``DefaultCommandGroup`` (``fleetplan simulate``) runs
its default command when the first argument is an option, so ``fleetplan simulate --fleet ...`` works
as it always did, while ``fleetplan simulate pdd ...`` runs a subcommand.  ``deprecated_command``
keeps an old command path working, hidden, with a one-line note on stderr.
"""

from __future__ import annotations

import copy
import functools
import importlib
import inspect
from typing import Any

import click

from fleetplan.cli.deprecation import deprecation_note
from fleetplan.cli.errors import FleetplanGroup

#: Where a lazily imported command lives: (module, attribute).
Target = tuple[str, str]


class ShortHelp(str):
    """A registered summary that is the command's ``short_help``: listed whole, as click lists one (a
    plain ``str`` summary is the first paragraph of the command's help, shortened to the width)."""


def load(target: Target) -> click.Command:
    """The click command ``target`` names (importing its module)."""
    module, attr = target
    return getattr(importlib.import_module(module), attr)


def deprecated_command(command: click.Command, old: str, new: str, hidden: bool = True) -> click.Command:
    """``command`` under its old path ``old`` (words after ``fleetplan``): same options, hidden from the
    group's help, and a one-line note naming ``new`` on stderr when it runs."""
    alias = copy.copy(command)
    alias.name = old.split()[-1]
    alias.hidden = hidden
    alias.short_help = f"Deprecated: use `fleetplan {new}`."
    alias.help = (f"Deprecated: use `fleetplan {new}` (`fleetplan {old}` goes away in the next release).\n\n"
                  f"{command.help or ''}")
    note = deprecation_note(f"`fleetplan {old}`", f"`fleetplan {new}`", "name")
    callback = command.callback

    @functools.wraps(callback)
    def announce(*args: Any, **kwargs: Any) -> Any:
        click.echo(note, err=True)
        return callback(*args, **kwargs)

    alias.callback = announce
    return alias


class LazyGroup(FleetplanGroup):
    """A ``FleetplanGroup`` whose subcommands are imported on first use.

    ``lazy_commands``: name -> (module, attribute).  ``summaries``: name -> the command's summary (the
    first paragraph of its help, which click shortens for the group's help, or its ``ShortHelp``),
    so that the group's help imports no command; a command without one is imported to be listed.
    ``deprecated_commands``: old path -> new path (tuples of command words below this group), each
    served by ``deprecated_command``; an old path of two words gets a hidden group for its first word.
    """

    def __init__(self, *args: Any, lazy_commands: dict[str, Target] | None = None,
                 deprecated_commands: dict[tuple[str, ...], tuple[str, ...]] | None = None,
                 summaries: dict[str, str] | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.lazy_commands = dict(lazy_commands or {})
        self.deprecated_commands = dict(deprecated_commands or {})
        self.summaries = dict(summaries or {})

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """The commands and their summaries, as ``click.Group`` lists them, without importing a command
        that has a registered summary (old names are hidden: not listed, not imported)."""
        rows: list[tuple[str, click.Command | str]] = []
        for name in self.list_commands(ctx):
            if name not in self.commands and name in self.summaries:
                rows.append((name, self.summaries[name]))
                continue
            if name not in self.commands and name not in self.lazy_commands:
                continue  # an old name: always hidden
            command = self.get_command(ctx, name)
            if command is not None and not command.hidden:
                rows.append((name, command))
        if not rows:
            return
        limit = formatter.width - 6 - max(len(name) for name, _ in rows)
        with formatter.section("Commands"):
            formatter.write_dl([(name, _short(c, limit)) for name, c in rows])

    def list_commands(self, ctx: click.Context) -> list[str]:
        old = {path[0] for path in self.deprecated_commands}
        return sorted({*self.lazy_commands, *old, *super().list_commands(ctx)})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name in self.commands:
            return super().get_command(ctx, cmd_name)
        if cmd_name in self.lazy_commands:
            command = load(self.lazy_commands[cmd_name])
        elif any(path[0] == cmd_name for path in self.deprecated_commands):
            command = self._old_name(ctx, cmd_name)
        else:
            return None
        self.add_command(command, cmd_name)
        return command

    def resolve_path(self, ctx: click.Context, path: tuple[str, ...]) -> click.Command:
        """The command at ``path`` below this group."""
        command: click.Command | None = self
        for word in path:
            assert isinstance(command, click.Group), path
            command = command.get_command(ctx, word)
            if command is None:
                raise LookupError(f"no command {' '.join(path)!r}")
        return command

    def _old_name(self, ctx: click.Context, cmd_name: str) -> click.Command:
        paths = {old: new for old, new in self.deprecated_commands.items() if old[0] == cmd_name}
        if (cmd_name,) in paths:
            new = paths[(cmd_name,)]
            return deprecated_command(self.resolve_path(ctx, new), cmd_name, " ".join(new))
        news = sorted({" ".join(new) for new in paths.values()})
        group = FleetplanGroup(cmd_name, hidden=True, short_help=f"Deprecated: use `fleetplan {news[0]}`.",
                               help=f"Deprecated: use `fleetplan {', '.join(news)}` (`fleetplan {cmd_name} ...` goes "
                               "away in the next release).",
                               epilog="\b\nExamples:\n" + "".join(f"  fleetplan {new} --help\n" for new in news))
        for old, new in paths.items():
            assert len(old) == 2, old
            command = deprecated_command(self.resolve_path(ctx, new), " ".join(old), " ".join(new), hidden=False)
            group.add_command(command, old[1])
        return group


def _short(command: click.Command | str, limit: int) -> str:
    """What ``click.Command.get_short_help_str`` gives for ``command`` or its registered summary."""
    if isinstance(command, ShortHelp):
        return inspect.cleandoc(command).strip()
    if isinstance(command, str):
        # click's own shortening of a help text (a throwaway command: its public API; the helper behind it
        # is private and deprecated in Click 8.5)
        return click.Command(None, help=command).get_short_help_str(limit).strip()
    return command.get_short_help_str(limit)


class DefaultCommandGroup(LazyGroup):
    """A group that runs its ``default`` command when no subcommand is named.

    ``fleetplan simulate --fleet f.toml ...`` (first argument an option, or no argument) runs the
    default command with every argument, exactly as a plain command would; ``fleetplan simulate pdd
    ...`` runs the subcommand.  ``--help`` as the first argument shows the default command's options
    followed by the subcommands.
    """

    def __init__(self, *args: Any, default: Target, **kwargs: Any) -> None:
        kwargs.setdefault("invoke_without_command", True)
        kwargs.setdefault("no_args_is_help", False)
        super().__init__(*args, callback=self._run_default, **kwargs)
        self.default = default

    def default_command(self) -> click.Command:
        return load(self.default)

    @property
    def _args_key(self) -> str:
        return f"fleetplan.default_args.{self.name}"

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:  # noqa: D102
        first = args[0] if args else None
        if first is None or (first.startswith("-") and first not in ctx.help_option_names):
            ctx.meta[self._args_key] = list(args)  # the default command's, parsed when it runs
            args = []
        return super().parse_args(ctx, args)

    def _run_default(self) -> Any:
        """The group's callback: runs the default command when no subcommand was named (else nothing)."""
        ctx = click.get_current_context()
        args = ctx.meta.pop(self._args_key, None)
        if args is None or ctx.invoked_subcommand is not None:
            return None
        command = self.default_command()
        # The default command's context takes this group's place: its usage and help read
        # "fleetplan simulate [OPTIONS]", never a command name the user did not type.
        with command.make_context(ctx.info_name, args, parent=ctx.parent) as sub_ctx:
            return command.invoke(sub_ctx)

    def format_help(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:  # noqa: D102
        command = self.default_command()
        default_ctx = click.Context(command, info_name=ctx.info_name, parent=ctx.parent)
        formatter.write_usage(ctx.command_path, " ".join(command.collect_usage_pieces(default_ctx)))
        formatter.write_usage(ctx.command_path, "COMMAND [ARGS]...", prefix="   or: ")
        self.format_help_text(ctx, formatter)
        command.format_options(default_ctx, formatter)
        self.format_commands(ctx, formatter)
        command.format_epilog(default_ctx, formatter)
        self.format_epilog(ctx, formatter)
