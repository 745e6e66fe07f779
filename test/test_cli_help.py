"""Every ``multibody`` subcommand (nested ones included) explains itself under ``--help``."""

import argparse

import pytest

from multibody_control.cli import build_parser, main


def _subcommands(parser, prefix=()):
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield (*prefix, name), sub
                yield from _subcommands(sub, (*prefix, name))


ALL = list(_subcommands(build_parser()))


def test_the_subcommands_are_found():
    names = {" ".join(path) for path, _ in ALL}
    assert {"models", "check", "assemble", "simulate", "invert", "run", "animate"} <= names


@pytest.mark.parametrize("path", [p for p, _ in ALL], ids=" ".join)
def test_help_describes_the_command(path, capsys):
    with pytest.raises(SystemExit) as info:
        main([*path, "--help"])
    assert info.value.code == 0
    text = capsys.readouterr().out
    assert text.startswith("usage: multibody " + " ".join(path))
    sub = dict(ALL)[path]
    # a description paragraph of its own (not just the usage line and the options)
    assert sub.description and len(sub.description.split()) >= 12, path
    assert " ".join(sub.description.split()[:6]) in " ".join(text.split())
    # every option and argument says what it is
    for action in sub._actions:
        if isinstance(action, (argparse._HelpAction, argparse._SubParsersAction)):
            continue
        assert action.help, f"multibody {' '.join(path)}: {action.dest} has no help text"
