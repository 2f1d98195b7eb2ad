"""``placer completion bash|zsh``: a shell completion script, printed on stdout.

Load it in the running shell with ``source <(placer completion bash)`` (``zsh`` alike), or for
every new shell with that line in ``~/.bashrc`` (``~/.zshrc``). It completes subcommands at any
depth (``placer fleet u`` → ``up``), the options of the command typed so far, an option's
choices (``--solver``, ``-o``), and file or folder names where a command takes a path.

The script is generated from placer's own argument parser, so it knows every command and option
as this version defines them, and it is static: completing runs no Python. For zsh it is the
same function, loaded through zsh's ``bashcompinit`` (as many CLIs ship theirs).
"""

from __future__ import annotations

import argparse
import shlex
from collections.abc import Iterator
from dataclasses import dataclass, field

__all__ = ["CommandSpec", "bash_script", "command_specs", "register", "run", "zsh_script"]

#: the metavars that name a folder (completed with folder names); other paths complete files.
_FOLDER_METAVARS = frozenset({"DIR"})
#: the metavars of values that are not paths (nothing to complete but what the user types).
_PLAIN_METAVARS = frozenset(
    {"NAME", "NS", "N", "S", "SECONDS", "TIMEOUT", "URL", "ADDRESS", "CLUSTER", "SEED"}
)


@dataclass
class CommandSpec:
    """What completes after ``placer`` and a command path (``""``, ``"fleet up"``)."""

    path: str
    #: its subcommands, and the choices of a positional argument (``completion bash|zsh``).
    subcommands: list[str] = field(default_factory=list)
    #: every option string (``-o``, ``--output``).
    options: list[str] = field(default_factory=list)
    #: option string -> its choices (empty: a value without choices).
    values: dict[str, list[str]] = field(default_factory=dict)
    #: option strings whose value is a folder, or a file.
    folders: list[str] = field(default_factory=list)
    files: list[str] = field(default_factory=list)


def command_specs(parser: argparse.ArgumentParser, path: str = "") -> Iterator[CommandSpec]:
    """The parser's commands, depth first (the top-level ``placer`` first, path ``""``)."""
    spec = CommandSpec(path)
    children: list[tuple[str, argparse.ArgumentParser]] = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, child in action.choices.items():
                spec.subcommands.append(name)
                children.append((name, child))
            continue
        if not action.option_strings:
            spec.subcommands += [str(c) for c in action.choices or ()]
            continue
        spec.options += action.option_strings
        if action.nargs == 0:
            continue
        for option in action.option_strings:
            spec.values[option] = [str(c) for c in action.choices or ()]
            if action.choices:
                continue
            metavar = str(action.metavar or "")
            if metavar in _FOLDER_METAVARS:
                spec.folders.append(option)
            elif metavar not in _PLAIN_METAVARS:
                spec.files.append(option)
    yield spec
    for name, child in children:
        yield from command_specs(child, f"{path} {name}".strip())


def _case(arms: list[tuple[str, str]], indent: str = "    ") -> str:
    """A shell ``case "$key" in`` body: one arm per (pattern, command)."""
    return "\n".join(f"{indent}{shlex.quote(pattern)}) {command} ;;" for pattern, command in arms)


def _words(items: list[str]) -> str:
    return shlex.quote(" ".join(items))


def bash_script(parser: argparse.ArgumentParser) -> str:
    """The bash completion script for ``parser`` (module docstring)."""
    specs = list(command_specs(parser))
    subcommands = [(s.path, f"echo {_words(s.subcommands)}") for s in specs if s.subcommands]
    options = [(s.path, f"echo {_words(s.options)}") for s in specs]
    values = [
        (f"{s.path}|{option}", f"echo {_words(choices)}")
        for s in specs
        for option, choices in s.values.items()
    ]
    paths = [(f"{s.path}|{o}", "echo dir") for s in specs for o in s.folders]
    paths += [(f"{s.path}|{o}", "echo file") for s in specs for o in s.files]
    prog = parser.prog
    return f"""# {prog} completion for bash: source <({prog} completion bash)
_{prog}_subcommands() {{
  case "$1" in
{_case(subcommands)}
  esac
}}
_{prog}_options() {{
  case "$1" in
{_case(options)}
  esac
}}
# the choices of an option (printed, maybe empty); status 1 when it takes no value
_{prog}_values() {{
  case "$1|$2" in
{_case(values)}
    *) return 1 ;;
  esac
}}
_{prog}_path_kind() {{
  case "$1|$2" in
{_case(paths)}
  esac
}}
_{prog}() {{
  local cur="${{COMP_WORDS[COMP_CWORD]}}" path="" skip="" word i subs
  for ((i = 1; i < COMP_CWORD; i++)); do
    word="${{COMP_WORDS[i]}}"
    if [[ -n "$skip" ]]; then skip=""; continue; fi
    if [[ "$word" == -* ]]; then
      [[ "$word" != *=* ]] && _{prog}_values "$path" "$word" >/dev/null && skip=1
      continue
    fi
    subs=" $(_{prog}_subcommands "$path") "
    if [[ "$subs" == *" $word "* ]]; then path="${{path:+$path }}$word"; fi
  done
  local option="" value="$cur"
  if [[ -n "$skip" ]]; then
    option="${{COMP_WORDS[COMP_CWORD-1]}}"
  elif [[ "$cur" == --*=* ]]; then
    option="${{cur%%=*}}"; value="${{cur#*=}}"
  fi
  if [[ -n "$option" ]]; then
    local choices kind
    choices="$(_{prog}_values "$path" "$option")"
    kind="$(_{prog}_path_kind "$path" "$option")"
    if [[ -n "$choices" ]]; then
      COMPREPLY=($(compgen -W "$choices" -- "$value"))
    elif [[ "$kind" == dir ]]; then
      COMPREPLY=($(compgen -d -- "$value"))
    elif [[ "$kind" == file ]]; then
      COMPREPLY=($(compgen -f -- "$value"))
    else
      COMPREPLY=()
    fi
    return 0
  fi
  if [[ "$cur" == -* ]]; then
    COMPREPLY=($(compgen -W "$(_{prog}_options "$path")" -- "$cur"))
    return 0
  fi
  subs="$(_{prog}_subcommands "$path")"
  if [[ -n "$subs" ]]; then
    COMPREPLY=($(compgen -W "$subs" -- "$cur"))
  else
    COMPREPLY=($(compgen -f -- "$cur"))
  fi
}}
complete -o filenames -o bashdefault -F _{prog} {prog}
"""


def zsh_script(parser: argparse.ArgumentParser) -> str:
    """The zsh completion script: the bash one through zsh's ``bashcompinit``."""
    prog = parser.prog
    return (
        f"# {prog} completion for zsh: source <({prog} completion zsh)\n"
        "if ! (( $+functions[compdef] )); then autoload -U +X compinit && compinit; fi\n"
        "autoload -U +X bashcompinit && bashcompinit\n" + bash_script(parser)
    )


SHELLS = {"bash": bash_script, "zsh": zsh_script}


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "completion",
        help="print a shell completion script (bash or zsh)",
        description=(
            "Print a completion script for SHELL on stdout. Load it now with "
            "`source <(placer completion bash)`, or for every shell with that line in "
            "~/.bashrc (zsh: `source <(placer completion zsh)` in ~/.zshrc)."
        ),
    )
    parser.add_argument("shell", choices=sorted(SHELLS), metavar="SHELL", help="bash or zsh")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from placer.cli import build_parser

    print(SHELLS[args.shell](build_parser()), end="")
    return 0
