"""`cortex completion SHELL`: a completion script for bash, zsh or fish,
generated from the argparse tree, so it always matches the commands. It
offers the subcommands of every level, their options, the choices of
options and positionals, file names where a value is a path, and the
global options (those of the top-level parser) at every level."""

from __future__ import annotations

import argparse
import re
from collections.abc import Callable
from dataclasses import dataclass, field

SHELLS = ("bash", "zsh", "fish")

# A value whose dest or metavar says it is a path completes with file names.
_PATH_LIKE = re.compile(r"file|dir|path|pem|config", re.IGNORECASE)
_HELP_CHARS = 80


@dataclass(frozen=True)
class Value:
    """How an option's or positional's value completes: with these words,
    with file names, or with nothing (any text)."""

    words: tuple[str, ...] = ()
    files: bool = False

    def kind(self) -> str:
        """The encoding the scripts share: `words:A B`, `files` or `any`."""
        if self.words:
            return "words:" + " ".join(self.words)
        return "files" if self.files else "any"


@dataclass(frozen=True)
class Option:
    flags: tuple[str, ...]
    help: str
    value: Value | None  # None: a switch, which takes no value


@dataclass(frozen=True)
class Positional:
    value: Value
    repeats: bool  # takes every further word (nargs *, + or REMAINDER)


@dataclass
class Command:
    """One level of the tree: `path` is its subcommand words ("" for the top)."""

    path: str
    subcommands: dict[str, str] = field(default_factory=dict)  # name -> help
    options: list[Option] = field(default_factory=list)
    positionals: list[Positional] = field(default_factory=list)


@dataclass
class Tree:
    prog: str
    commands: list[Command]
    # The top level's options but help and version: accepted at any level.
    global_options: list[Option]

    def offered(self, command: Command) -> list[Option]:
        """The options to offer at `command`: its own, then the global ones
        it does not define itself."""
        own = {flag for option in command.options for flag in option.flags}
        extra = [o for o in self.global_options if not own.intersection(o.flags)]
        return [*command.options, *extra]


def script(parser: argparse.ArgumentParser, shell: str) -> str:
    """The completion script of `parser` for `shell` (bash, zsh or fish)."""
    render: dict[str, Callable[[Tree], str]] = {"bash": _bash, "zsh": _zsh, "fish": _fish}
    if shell not in render:
        raise ValueError(f"no completion for shell {shell!r}; expected one of {', '.join(SHELLS)}")
    return render[shell](walk(parser))


# -- the argparse tree -----------------------------------------------------------


def walk(parser: argparse.ArgumentParser) -> Tree:
    """Every level of `parser`, depth first, from the top."""
    commands: list[Command] = []
    _visit(parser, "", commands)
    switches = (argparse._HelpAction, argparse._VersionAction)
    global_options = [
        _option(action, parser.prog)
        for action in parser._actions
        if action.option_strings
        and action.help != argparse.SUPPRESS
        and not isinstance(action, switches)
    ]
    return Tree(_identifier(parser.prog), commands, global_options)


def _visit(parser: argparse.ArgumentParser, path: str, commands: list[Command]) -> None:
    command = Command(path)
    commands.append(command)
    children: list[tuple[str, argparse.ArgumentParser]] = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            helps = {a.dest: _help(a, parser.prog) for a in action._choices_actions}
            by_parser = {id(action.choices[name]): text for name, text in helps.items()}
            for name, child in action.choices.items():
                command.subcommands[name] = helps.get(name) or by_parser.get(id(child), "")
                children.append((name, child))
        elif action.option_strings:
            if action.help != argparse.SUPPRESS:
                command.options.append(_option(action, parser.prog))
        elif action.help != argparse.SUPPRESS:
            repeats = action.nargs in ("*", "+", argparse.REMAINDER, argparse.PARSER)
            count = action.nargs if isinstance(action.nargs, int) else 1
            command.positionals += [Positional(_value(action), repeats)] * max(count, 1)
    for name, child in children:
        _visit(child, f"{path} {name}".strip(), commands)


def _option(action: argparse.Action, prog: str) -> Option:
    value = None if action.nargs == 0 else _value(action)
    return Option(tuple(action.option_strings), _help(action, prog), value)


def _value(action: argparse.Action) -> Value:
    if action.choices is not None and not isinstance(action.choices, dict):
        return Value(words=tuple(str(choice) for choice in action.choices))
    metavar = action.metavar if isinstance(action.metavar, str) else ""
    return Value(files=bool(_PATH_LIKE.search(f"{action.dest} {metavar}")))


def _help(action: argparse.Action, prog: str) -> str:
    text = action.help or ""
    try:
        text = text % {**vars(action), "prog": prog}
    except (KeyError, TypeError, ValueError):
        pass
    text = " ".join(text.split())
    return text if len(text) <= _HELP_CHARS else text[: _HELP_CHARS - 1] + "…"


def _identifier(prog: str) -> str:
    return re.sub(r"\W", "_", prog.split()[0]) or "prog"


@dataclass(frozen=True)
class _Arm:
    """One arm of a shell `case`: `literal`, with any text allowed before
    (any level) or after (any index) it, and what it answers (for a value:
    its kind)."""

    literal: str
    answer: str
    any_before: bool = False
    any_after: bool = False


def _value_arms(tree: Tree) -> list[_Arm]:
    """Matched against "LEVEL|OPTION": what value each option takes, the
    global options last, at any level."""
    arms: list[_Arm] = []
    for command in tree.commands[1:]:
        for option in command.options:
            if option.value is not None and option not in tree.global_options:
                kind = option.value.kind()
                arms += [_Arm(f"{command.path}|{flag}", kind) for flag in option.flags]
    for option in tree.global_options:
        if option.value is not None:
            kind = option.value.kind()
            arms += [_Arm(f"|{flag}", kind, any_before=True) for flag in option.flags]
    return arms


def _positional_arms(tree: Tree) -> list[_Arm]:
    """Matched against "LEVEL|INDEX": what each positional argument is; a
    repeating last one matches every further index."""
    exact: list[_Arm] = []
    repeating: list[_Arm] = []
    for command in tree.commands:
        for index, positional in enumerate(command.positionals):
            exact.append(_Arm(f"{command.path}|{index}", positional.value.kind()))
        if command.positionals and command.positionals[-1].repeats:
            kind = command.positionals[-1].value.kind()
            repeating.append(_Arm(f"{command.path}|", kind, any_after=True))
    return exact + repeating


# -- bash ------------------------------------------------------------------------


def _sh(text: str) -> str:
    """`text` single-quoted for bash and zsh."""
    return "'" + text.replace("'", "'\\''") + "'"


def _case(variable: str, arms: list[tuple[_Arm, str]], default: str) -> str:
    """A bash/zsh `case` on `variable` with a body per arm."""
    lines = [f'    case "{variable}" in']
    for arm, body in arms:
        before, after = "*" * arm.any_before, "*" * arm.any_after
        lines.append(f"        {before}{_sh(arm.literal)}{after}) {body} ;;")
    lines.append(f"        *) {default} ;;")
    lines.append("    esac")
    return "\n".join(lines)


def _bash(tree: Tree) -> str:
    name = f"_{tree.prog}"
    reply = f"{name}_reply"

    def assign(arm: _Arm) -> tuple[_Arm, str]:
        return arm, f"{reply}={_sh(arm.answer)}"

    subcommands = [
        assign(_Arm(c.path, " ".join(c.subcommands))) for c in tree.commands if c.subcommands
    ]
    options = [
        assign(_Arm(c.path, " ".join(f for o in tree.offered(c) for f in o.flags)))
        for c in tree.commands
    ]
    return _BASH.format(
        name=name,
        prog=tree.prog,
        subcommands=_case("$1", subcommands, f"{reply}=''"),
        options=_case("$1", options, f"{reply}=''"),
        values=_case("$1|$2", [assign(a) for a in _value_arms(tree)], f"{reply}=''"),
        positionals=_case("$1|$2", [assign(a) for a in _positional_arms(tree)], f"{reply}=''"),
    )


_BASH = """\
# bash completion for {prog}; generated by `{prog} completion bash`.
# Load it with:  source <({prog} completion bash)

{name}_subcommands() {{  # LEVEL: its subcommands
{subcommands}
}}

{name}_options() {{  # LEVEL: its options and the global ones
{options}
}}

{name}_value() {{  # LEVEL OPTION: what the option's value is ('' for a switch)
{values}
}}

{name}_positional() {{  # LEVEL INDEX: what that positional argument is
{positionals}
}}

# Words are split on blanks only, from COMP_LINE: COMP_WORDS also splits
# on `=` and `:` (`--node 127.0.0.1:7200`).
{name}() {{
    local line="${{COMP_LINE:0:COMP_POINT}}" level="" kind="" word prefix="" i n npos=0
    local {name}_reply=""
    local -a words
    read -r -a words <<< "$line"
    [[ -z $line || $line == *[[:space:]] ]] && words+=("")
    n=$((${{#words[@]}} - 1))
    local cur="${{words[n]}}"
    COMPREPLY=()
    for ((i = 1; i < n; i++)); do
        word="${{words[i]}}"
        if [[ $word == -- ]]; then
            kind=files  # the arguments of the command a task runs
            break
        elif [[ $word == -* ]]; then
            [[ $word == *=* ]] && continue
            {name}_value "$level" "$word"
            [[ -z ${name}_reply ]] && continue
            if ((i + 1 == n)); then
                kind=${name}_reply
                break
            fi
            i=$((i + 1))
        else
            {name}_subcommands "$level"
            if [[ " ${name}_reply " == *" $word "* ]]; then
                level="${{level:+$level }}$word"
                npos=0
            else
                npos=$((npos + 1))
            fi
        fi
    done
    if [[ -z $kind ]]; then
        if [[ $cur == -*=* ]]; then
            {name}_value "$level" "${{cur%%=*}}"
            kind=${name}_reply
            prefix="${{cur%%=*}}="
            cur="${{cur#*=}}"
        elif [[ $cur == -* ]]; then
            {name}_options "$level"
            kind="words:${name}_reply"
        else
            {name}_subcommands "$level"
            if [[ -n ${name}_reply ]]; then
                kind="words:${name}_reply"
            else
                {name}_positional "$level" "$npos"
                kind=${name}_reply
            fi
        fi
    fi
    local -a found=()
    case "$kind" in
        words:*) found=($(compgen -W "${{kind#words:}}" -- "$cur")) ;;
        files)
            compopt -o filenames 2>/dev/null
            local IFS=$'\\n'
            found=($(compgen -f -- "$cur"))
            ;;
    esac
    # Bash replaces only the text after the last `=` or `:` (its $2).
    local typed="$prefix$cur" strip
    strip="${{typed%"${{2-}}"}}"
    for word in "${{found[@]}}"; do
        word="$prefix$word"
        COMPREPLY+=("${{word#"$strip"}}")
    done
    return 0
}}

complete -F {name} {prog}
"""


# -- zsh -------------------------------------------------------------------------


def _describe_entry(name: str, text: str) -> str:
    name = name.replace(":", "\\:")
    return _sh(f"{name}:{text}" if text else name)


def _zsh(tree: Tree) -> str:
    def described(pairs: list[tuple[str, str]]) -> str:
        return "reply=(" + " ".join(_describe_entry(n, t) for n, t in pairs) + ")"

    subcommands = [
        (_Arm(c.path, ""), described(list(c.subcommands.items())))
        for c in tree.commands
        if c.subcommands
    ]
    options = [
        (_Arm(c.path, ""), described([(f, o.help) for o in tree.offered(c) for f in o.flags]))
        for c in tree.commands
    ]
    values = [(a, f"REPLY={_sh(a.answer)}") for a in _value_arms(tree)]
    positionals = [(a, f"REPLY={_sh(a.answer)}") for a in _positional_arms(tree)]
    return _ZSH.format(
        name=f"_{tree.prog}",
        prog=tree.prog,
        subcommands=_case("$1", subcommands, "reply=()"),
        options=_case("$1", options, "reply=()"),
        values=_case("$1|$2", values, "REPLY=''"),
        positionals=_case("$1|$2", positionals, "REPLY=''"),
    )


_ZSH = """\
#compdef {prog}
# zsh completion for {prog}; generated by `{prog} completion zsh`.
# Load it with:  source <({prog} completion zsh)   (after compinit)
# or save it as _{prog} in a directory of $fpath.

{name}_subcommands() {{  # LEVEL: its subcommands, as name:description
{subcommands}
}}

{name}_options() {{  # LEVEL: its options and the global ones, as name:description
{options}
}}

{name}_value() {{  # LEVEL OPTION: what the option's value is ('' for a switch)
{values}
}}

{name}_positional() {{  # LEVEL INDEX: what that positional argument is
{positionals}
}}

{name}() {{
    local level="" kind="" word cur="${{words[CURRENT]}}" REPLY
    local -a reply names values
    local -i i npos=0
    for ((i = 2; i < CURRENT; i++)); do
        word="${{words[i]}}"
        if [[ $word == -- ]]; then
            kind=files  # the arguments of the command a task runs
            break
        elif [[ $word == -* ]]; then
            [[ $word == *=* ]] && continue
            {name}_value "$level" "$word"
            [[ -z $REPLY ]] && continue
            if ((i + 1 == CURRENT)); then
                kind=$REPLY
                break
            fi
            i=$((i + 1))
        else
            {name}_subcommands "$level"
            names=(${{reply%%:*}})
            if ((${{names[(Ie)$word]}})); then
                level="${{level:+$level }}$word"
                npos=0
            else
                npos=$((npos + 1))
            fi
        fi
    done
    if [[ -z $kind ]]; then
        if [[ $cur == -*=* ]]; then
            {name}_value "$level" "${{cur%%=*}}"
            kind=$REPLY
            compset -P '*='
        elif [[ $cur == -* ]]; then
            {name}_options "$level"
            _describe -t options option reply
            return
        else
            {name}_subcommands "$level"
            if (($#reply)); then
                _describe -t commands command reply
                return
            fi
            {name}_positional "$level" "$npos"
            kind=$REPLY
        fi
    fi
    case $kind in
        words:*)
            values=(${{=kind#words:}})
            compadd -a values
            ;;
        files) _files ;;
    esac
}}

if [[ ${{zsh_eval_context[-1]}} == loadautofunc ]]; then
    {name} "$@"
else
    compdef {name} {prog}
fi
"""


# -- fish ------------------------------------------------------------------------


def _fish_quote(text: str) -> str:
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def _switch(variable: str, arms: list[tuple[_Arm, list[str]]]) -> str:
    """A fish `switch` on `variable` with body lines per arm. A quoted `*`
    still matches any text there; an unquoted one would glob file names."""
    lines = [f'    switch "{variable}"']
    for arm, body in arms:
        before, after = "*" * arm.any_before, "*" * arm.any_after
        lines.append(f"        case {_fish_quote(before + arm.literal + after)}")
        lines += [f"            {line}" for line in body]
    lines.append("    end")
    return "\n".join(lines)


def _print_lines(rows: list[str]) -> list[str]:
    return ["printf '%s\\n' " + " ".join(_fish_quote(row) for row in rows)] if rows else []


def _fish(tree: Tree) -> str:
    def echo(arm: _Arm) -> tuple[_Arm, list[str]]:
        return arm, [f"echo {_fish_quote(arm.answer)}"]

    subcommands = [
        (_Arm(c.path, ""), _print_lines([f"{n}\t{t}" for n, t in c.subcommands.items()]))
        for c in tree.commands
        if c.subcommands
    ]
    options = [
        (
            _Arm(c.path, ""),
            _print_lines([f"{f}\t{o.help}" for o in tree.offered(c) for f in o.flags]),
        )
        for c in tree.commands
    ]
    return _FISH.format(
        name=f"__{tree.prog}",
        prog=tree.prog,
        subcommands=_switch("$argv[1]", subcommands),
        options=_switch("$argv[1]", options),
        values=_switch("$argv[1]|$argv[2]", [echo(a) for a in _value_arms(tree)]),
        positionals=_switch("$argv[1]|$argv[2]", [echo(a) for a in _positional_arms(tree)]),
    )


_FISH = """\
# fish completion for {prog}; generated by `{prog} completion fish`.
# Load it with:  {prog} completion fish | source
# or save it as ~/.config/fish/completions/{prog}.fish

function {name}_subcommands --description 'LEVEL: its subcommands, tab, description'
{subcommands}
end

function {name}_options --description 'LEVEL: its options and the global ones'
{options}
end

function {name}_value --description 'LEVEL OPTION: what the value is (nothing for a switch)'
{values}
end

function {name}_positional --description 'LEVEL INDEX: what that positional argument is'
{positionals}
end

function {name}_complete
    set -l tokens (commandline -opc)
    set -l cur (commandline -ct)
    set -l level ''
    set -l kind ''
    set -l prefix ''
    set -l npos 0
    set -l n (count $tokens)
    set -l i 2
    while test $i -le $n
        set -l word $tokens[$i]
        if test "$word" = --
            set kind files  # the arguments of the command a task runs
            break
        else if string match -q -- '-*' $word
            if not string match -q -- '*=*' $word
                set -l value ({name}_value "$level" $word)
                if test -n "$value"
                    if test $i -eq $n
                        set kind $value
                        break
                    end
                    set i (math $i + 1)
                end
            end
        else if contains -- $word ({name}_subcommands "$level" | string replace -r '\\t.*' '')
            set level (string trim -- "$level $word")
            set npos 0
        else
            set npos (math $npos + 1)
        end
        set i (math $i + 1)
    end
    if test -z "$kind"
        if string match -q -- '-*=*' $cur
            set prefix (string replace -r '=.*' '=' -- $cur)
            set kind ({name}_value "$level" (string replace -r '=.*' '' -- $cur))
            set cur (string replace -r '^[^=]*=' '' -- $cur)
        else if string match -q -- '-*' $cur
            {name}_options "$level"
            return
        else
            set -l found ({name}_subcommands "$level")
            if test (count $found) -gt 0
                printf '%s\\n' $found
                return
            end
            set kind ({name}_positional "$level" $npos)
        end
    end
    switch "$kind"
        case 'words:*'
            for word in (string split ' ' -- (string replace 'words:' '' -- $kind))
                printf '%s%s\\n' $prefix $word
            end
        case files
            for path in (__fish_complete_path $cur)
                printf '%s%s\\n' $prefix $path
            end
    end
end

complete -c {prog} -f -a '({name}_complete)'
"""
