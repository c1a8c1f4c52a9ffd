"""Declared settings: every command-line flag is declared once, as a field of a settings dataclass.

A field declared with :func:`flag` (or :func:`switch`, :func:`path`, :func:`positional`) carries its flag names,
placeholder (``metavar``), help, value type, default and, for a path, its role (``PATH_ROLES``:
what the command reads and writes; the own-input guard, ``tui.cli.guard``, reads the roles from here). A field
declared with :func:`block` is a nested settings dataclass: an argument group when it has a title (the class's
``GROUP``, or the block's ``title``), else its flags go where the enclosing block puts its own. A field declared
with :func:`custom` adds its flags with a function and reads its value from the parsed namespace with another
(the SLO flags, whose rows are a table).

From the declarations:

- :func:`build` adds the flags to an ``argparse`` parser (groups, mutually exclusive sets, the ``Given`` action
  of a verdict flag), and sets the parser's description and epilog from the class's ``DESCRIPTION`` / ``EPILOG``;
- :func:`settings_from` makes the settings object of a parsed namespace (the only reader of the namespace: the
  commands get the object, ``run(settings) -> int``, never the namespace);
- :func:`path_values` lists every path setting of a settings object with its role (the guard);
- :func:`parse` parses an argument list with a parser built from one settings class (tests, one block alone).

A declared default may be a name of ``tui.core.defaults`` (:class:`CoreDefault`), read when the parser is built, as
help text may be (:class:`CoreText`, a template): a default changed there is followed by every parser and every
settings object, no copy of it is kept here.
"""

from __future__ import annotations

import argparse
import dataclasses
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, TypeVar

__all__ = ["APPEND", "GIVEN", "INPUT", "INPUT_DIR", "OUTPUT", "OUTPUT_DIR", "PATH_ROLES", "Arg", "Block",
           "CoreDefault", "CoreText", "Custom", "Given", "Settings", "arg_values", "block", "blocks_of", "build",
           "custom", "declared_args", "flag", "parse", "path", "path_values", "positional", "settings_from",
           "switch"]

#: what a path flag is to its command: declared with the flag (``path(..., role=...)``); the
#: own-input guard (``tui.cli.guard``) reads the roles from the declarations, so a path flag declared without one
#: fails tests/cli/test_outputs.py and a new one cannot be forgotten
INPUT = "input"  # read
OUTPUT = "output"  # written whole (replaced)
APPEND = "append"  # appended to (a record file)
OUTPUT_DIR = "output-dir"  # a folder the command writes files into
INPUT_DIR = "input-dir"  # a folder the command reads files from
PATH_ROLES = (INPUT, OUTPUT, APPEND, OUTPUT_DIR, INPUT_DIR)


#: the namespace attribute holding the verdict settings whose flags the user GAVE (issue 35: a flag that differs
#: from the run's own setting re-judges; one left at its default does not): set by the ``Given`` action
GIVEN = "verdict_flags_given"


class Given(argparse.Action):
    """Stores the value (as ``store`` does) and remembers that the flag was given (``GIVEN``: the verdict setting
    it sets, ``tui.core.verdict_settings.FIELDS``): the defaults stay the values (``--help`` and every reader
    unchanged), and a reader knows which were given. A flag declared with ``verdict=NAME`` (``tui.cli.declare``)
    takes this action."""

    def __init__(self, option_strings: list[str], dest: str, setting: str | None = None, **kw: Any) -> None:
        super().__init__(option_strings, dest, **kw)
        self.setting = setting or dest

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any,
                 option_string: str | None = None) -> None:
        setattr(namespace, self.dest, values)
        setattr(namespace, GIVEN, frozenset(vars(namespace).get(GIVEN, frozenset())) | {self.setting})


ARG = "servewatch.arg"
BLOCK = "servewatch.block"
CUSTOM = "servewatch.custom"

T = TypeVar("T")


class CoreDefault:
    """A default that is a name of ``tui.core.defaults``, read when it is needed (parser built, object made)."""

    def __init__(self, name: str) -> None:
        self.name = name

    def value(self) -> Any:
        import tui.core.defaults as defaults

        return getattr(defaults, self.name)

    def __repr__(self) -> str:
        return f"CoreDefault({self.name!r})"


class CoreText(str):
    """A help text that names defaults of ``tui.core.defaults`` as ``{NAME}`` / ``{NAME:g}`` (``str.format``),
    filled in when the parser is built."""

    def text(self) -> str:
        import tui.core.defaults as defaults

        return self.format_map(vars(defaults))


def _resolve(value: Any) -> Any:
    return value.value() if isinstance(value, CoreDefault) else value


@dataclass(frozen=True)
class Arg:
    """One flag (or positional argument) as argparse takes it, and what the settings know about it.

    ``role``: a path's role (``PATH_ROLES``), ``files``: the names an output folder receives,
    ``default_from``: an output whose default is derived from the other settings (``f(settings) -> path``);
    ``exclusive``: the name of the mutually exclusive set it belongs to in its group (the block's
    ``REQUIRED_SETS`` says which sets must be given); ``verdict``: the verdict setting it sets
    (``tui.core.verdict_settings.FIELDS``): its action remembers that it was given (``Given``);
    ``into``: the field of the domain settings (``LoadConfig``, ``BudgetInputs``) it fills as it is; ``kind``: how
    a value kept as text is read (the budget flags: ``count``, ``int``, ``float``, ``text``)."""

    flags: tuple[str, ...]
    help: str | None = None
    metavar: str | None = None
    type: Callable[[str], Any] | None = None
    default: Any = None
    action: Any = None
    choices: Sequence[Any] | None = None
    nargs: str | int | None = None
    required: bool = False
    role: str | None = None
    files: tuple[str, ...] = ()
    default_from: Callable[[Any], str | None] | None = None
    exclusive: str | None = None
    verdict: str | None = None
    into: str | None = None
    kind: str | None = None

    @property
    def positional(self) -> bool:
        return not self.flags[0].startswith("-")

    @property
    def shown(self) -> str:
        """How a message names it: the first flag, or a positional's name in capitals."""
        return self.flags[0] if not self.positional else self.flags[0].upper()


@dataclass(frozen=True)
class Block:
    """A nested settings dataclass: ``title`` (None: the class's ``GROUP``; "": no group of its own), ``omit``
    (fields left out: no flag, their defaults stand), ``optional`` (exclusive sets not required here),
    ``flags`` (False: no flag at all, the block's defaults stand)."""

    cls: type
    title: str | None = None
    omit: tuple[str, ...] = ()
    optional: tuple[str, ...] = ()
    flags: bool = True


@dataclass(frozen=True)
class Custom:
    """Flags added by ``add(container)``; the value read by ``read(namespace)``."""

    add: Callable[[Any], None] | None
    read: Callable[[argparse.Namespace], Any]


def _default_field(default: Any, metadata: Mapping[str, Any]) -> Any:
    if isinstance(default, CoreDefault):
        return field(default_factory=default.value, metadata=metadata)
    if isinstance(default, list):
        items = list(default)
        return field(default_factory=lambda: list(items), metadata=metadata)
    return field(default=default, metadata=metadata)


def flag(*flags: str, help: str | None = None, default: Any = None, **kw: Any) -> Any:
    """A flag: the field's default is the flag's (``CoreDefault``: read when needed)."""
    arg = Arg(flags=flags, help=help, default=default, **kw)
    if arg.required or arg.positional:
        return field(metadata={ARG: arg})  # no default: given, or argparse refuses
    return _default_field(default, {ARG: arg})


def switch(*flags: str, help: str | None = None) -> Any:
    """An on/off flag (``store_true``), off unless given."""
    return flag(*flags, help=help, default=False, action="store_true")


def path(*flags: str, role: str, help: str | None = None, default: Any = None, **kw: Any) -> Any:
    """A path flag with its role (``PATH_ROLES``)."""
    if role not in PATH_ROLES:
        raise ValueError(f"unknown path role {role!r}")
    return flag(*flags, help=help, default=default, role=role, **kw)


def positional(name: str, *, help: str | None = None, role: str | None = None, **kw: Any) -> Any:
    """A positional argument (the field's name is ``name``)."""
    return flag(name, help=help, role=role, **kw)


def block(cls: type, *, title: str | None = None, omit: tuple[str, ...] = (), optional: tuple[str, ...] = (),
          flags: bool = True) -> Any:
    """A nested settings dataclass (see :class:`Block`)."""
    spec = Block(cls, title, tuple(omit), tuple(optional), flags)
    return field(default_factory=cls, metadata={BLOCK: spec})


def custom(add: Callable[[Any], None] | None, read: Callable[[argparse.Namespace], Any],
           default_factory: Callable[[], Any]) -> Any:
    """Flags that a function adds (``add(container)``) and whose value another reads (``read(namespace)``)."""
    return field(default_factory=default_factory, metadata={CUSTOM: Custom(add, read)})


# ------------------------------------------------------------------ the parser


def dest_of(f: dataclasses.Field, arg: Arg) -> str:
    return arg.flags[0] if arg.positional else f.name


def _help(arg: Arg) -> str | None:
    return arg.help.text() if isinstance(arg.help, CoreText) else arg.help


def _add_flag(container: Any, f: dataclasses.Field, arg: Arg) -> argparse.Action:
    kw: dict[str, Any] = {"help": _help(arg)}
    if not arg.positional:
        kw["dest"] = f.name
        kw["default"] = _resolve(arg.default)
        if arg.required:
            kw["required"] = True
    for name in ("metavar", "type", "choices", "nargs"):
        value = getattr(arg, name)
        if value is not None:
            kw[name] = value
    action = arg.action
    if arg.verdict is not None:
        action, kw["setting"] = Given, arg.verdict
    if action is not None:
        kw["action"] = action
    made = container.add_argument(*arg.flags, **kw)
    made.declared = arg  # the declaration, for whoever reads the parser (tests/cli/test_outputs.py)
    if arg.role is not None:  # a path's role on the parser too (``tui.cli.guard.path_actions``)
        made.path_role, made.path_files, made.path_default = arg.role, arg.files, arg.default_from
    return made


def _add_block(parser: argparse.ArgumentParser, container: Any, cls: type, spec: Block) -> None:
    title = spec.title if spec.title is not None else getattr(cls, "GROUP", None)
    if title:
        container = parser.add_argument_group(title)
    required_sets = set(getattr(cls, "REQUIRED_SETS", ())) - set(spec.optional)
    exclusive: dict[str, Any] = {}
    for f in dataclasses.fields(cls):
        if f.name in spec.omit:
            continue
        if ARG in f.metadata:
            arg: Arg = f.metadata[ARG]
            target = container
            if arg.exclusive is not None:
                if arg.exclusive not in exclusive:
                    exclusive[arg.exclusive] = container.add_mutually_exclusive_group(
                        required=arg.exclusive in required_sets)
                target = exclusive[arg.exclusive]
            _add_flag(target, f, arg)
        elif BLOCK in f.metadata:
            sub: Block = f.metadata[BLOCK]
            if sub.flags:
                _add_block(parser, container, sub.cls, sub)
        elif CUSTOM in f.metadata:
            c: Custom = f.metadata[CUSTOM]
            if c.add is not None:
                c.add(container)


def build(parser: argparse.ArgumentParser, cls: type) -> argparse.ArgumentParser:
    """Add the flags ``cls`` declares to ``parser`` (and its ``DESCRIPTION`` / ``EPILOG`` when it has them)."""
    for attr in ("description", "epilog"):
        value = getattr(cls, attr.upper(), None)
        if callable(value):
            value = value()
        if value is not None:
            setattr(parser, attr, value)
    _add_block(parser, parser, cls, Block(cls, ""))
    dests = [a.dest for a in parser._actions if a.dest != argparse.SUPPRESS]
    doubled = sorted({d for d in dests if dests.count(d) > 1})
    if doubled:  # two flags writing one namespace attribute: one would silently set the other's setting
        raise ValueError(f"{cls.__name__}: flags share a destination: {', '.join(doubled)} (rename a field)")
    return parser


# ------------------------------------------------------------------ the settings object


def settings_from(cls: type[T], ns: argparse.Namespace, spec: Block | None = None) -> T:
    """The settings object of a parsed namespace (what ``build(parser, cls)`` declared)."""
    spec = spec or Block(cls, "")
    values = vars(ns)
    kw: dict[str, Any] = {}
    for f in dataclasses.fields(cls):  # type: ignore[arg-type]
        if not spec.flags or f.name in spec.omit:
            continue  # no flag: the field's default stands
        if ARG in f.metadata:
            kw[f.name] = values[dest_of(f, f.metadata[ARG])]
        elif BLOCK in f.metadata:
            sub: Block = f.metadata[BLOCK]
            kw[f.name] = settings_from(sub.cls, ns, sub)
        elif CUSTOM in f.metadata:
            kw[f.name] = f.metadata[CUSTOM].read(ns)
    return cls(**kw)


def parse(cls: type[T], argv: Sequence[str], parser: argparse.ArgumentParser | None = None) -> T:
    """Parse ``argv`` with a parser built from ``cls`` alone (a block, or one command's settings)."""
    p = build(parser or argparse.ArgumentParser(), cls)
    return settings_from(cls, p.parse_args(list(argv)))


def declared_args(cls: type, spec: Block | None = None) -> Iterator[tuple[dataclasses.Field, Arg]]:
    """Every flag ``cls`` declares (nested blocks included), with its field."""
    spec = spec or Block(cls, "")
    if not spec.flags:
        return
    for f in dataclasses.fields(cls):
        if f.name in spec.omit:
            continue
        if ARG in f.metadata:
            yield f, f.metadata[ARG]
        elif BLOCK in f.metadata:
            yield from declared_args(f.metadata[BLOCK].cls, f.metadata[BLOCK])


def arg_values(settings: Any, spec: Block | None = None) -> Iterator[tuple[Arg, Any, Any]]:
    """(declaration, value, the settings object holding it) of every flag of ``settings`` (nested blocks
    included), in declaration order."""
    spec = spec or Block(type(settings), "")
    if not spec.flags:
        return
    for f in dataclasses.fields(settings):
        if f.name in spec.omit:
            continue
        if ARG in f.metadata:
            yield f.metadata[ARG], getattr(settings, f.name), settings
        elif BLOCK in f.metadata:
            yield from arg_values(getattr(settings, f.name), f.metadata[BLOCK])


def path_values(settings: Any) -> Iterator[tuple[Arg, Any, Any]]:
    """(declaration, value, the settings object holding it) of every path setting of ``settings`` (nested blocks
    included), in declaration order."""
    return ((arg, value, holder) for arg, value, holder in arg_values(settings) if arg.role is not None)


def blocks_of(settings: Any, cls: type[T]) -> list[T]:
    """Every block of type ``cls`` inside ``settings`` (itself included), depth first."""
    found: list[Any] = [settings] if isinstance(settings, cls) else []
    if dataclasses.is_dataclass(settings) and not isinstance(settings, type):
        for f in dataclasses.fields(settings):
            if BLOCK in f.metadata:
                found += blocks_of(getattr(settings, f.name), cls)
    return found


class Settings:
    """The base of a command's settings: ``DESCRIPTION`` and ``EPILOG`` of its ``--help`` (None: the command
    table's one-line help, and the exit codes); a block's ``GROUP`` (its argument group's title) and
    ``REQUIRED_SETS`` (the exclusive sets one of which must be given)."""

    DESCRIPTION: ClassVar[str | Callable[[], str] | None] = None
    EPILOG: ClassVar[str | None] = None
    GROUP: ClassVar[str | None] = None
    REQUIRED_SETS: ClassVar[tuple[str, ...]] = ()
