"""`cortex completion bash|zsh|fish`: each script is run by its own shell on
command lines a person types, and must offer the subcommands of every
level, their options and the global ones (after the subcommand too), the
choices of options and positionals, and file names for paths."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from cortex.cli.completion import SHELLS, Command, script, walk
from cortex.cli.main import build_parser

TREE = walk(build_parser())
LEVELS = [c for c in TREE.commands if c.subcommands]
GLOBAL_FLAGS = {"--node", "--token", "--token-file", "--tls-ca", "--consistency"}

needs_zsh = pytest.mark.skipif(shutil.which("zsh") is None, reason="zsh is not installed")
needs_fish = pytest.mark.skipif(shutil.which("fish") is None, reason="fish is not installed")


def _script(shell: str, tmp_path: Path) -> Path:
    path = tmp_path / f"cortex.{shell}"
    path.write_text(script(build_parser(), shell))
    return path


def _long_flags(command: Command) -> set[str]:
    return {f for o in TREE.offered(command) for f in o.flags if f.startswith("--")}


def _line(command: Command, rest: str) -> str:
    return " ".join(["cortex", *command.path.split(), rest])


def _run(argv: list[str], driver: str, cwd: Path) -> list[str]:
    done = subprocess.run(
        argv, input=driver, capture_output=True, text=True, timeout=60, cwd=cwd, check=False
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.splitlines()


def _completions(output: list[str], lines: list[str]) -> dict[str, list[str]]:
    """The drivers print one `LINE<TAB>CANDIDATE` per candidate and a
    `LINE<TAB>` marker per line, so a line with no candidates is seen too."""
    found: dict[str, list[str]] = {line: [] for line in lines}
    for row in output:
        line, _, candidate = row.partition("\t")
        assert line in found, row
        if candidate:
            found[line].append(candidate.split("\t")[0])
    return found


def _cases(tmp_path: Path) -> dict[str, set[str]]:
    """Command lines and candidates they must offer, the same for every shell."""
    (tmp_path / "defs").mkdir()
    (tmp_path / "defs" / "flow.yaml").write_text("name: x\n")
    cases: dict[str, set[str]] = {
        "cortex ": {"node", "task", "workflow", "logs", "events", "dev", "demo", "completion"},
        "cortex t": {"task", "top"},
        "cortex --node 127.0.0.1:7200 task l": {"list"},
        "cortex --consistency stale task ": {"submit", "get", "list", "cancel"},
        "cortex -": {"--help", "--version", "--node", "--consistency"},
        "cortex task list --consistency ": {"stale", "session", "linearizable"},
        "cortex task list -o ": {"table", "json", "yaml"},
        "cortex events -f --": {"--task", "--workflow", "--event", "--node", "--tls-ca"},
        "cortex dev ": {"start", "stop"},
        "cortex dev --data-dir somewhere --nodes 3 ": {"start", "stop"},
        "cortex completion ": set(SHELLS),
        f"cortex workflow submit {tmp_path}/defs/fl": {f"{tmp_path}/defs/flow.yaml"},
        f"cortex node start --data-dir {tmp_path}/de": {f"{tmp_path}/defs"},
        f"cortex task list --tls-ca {tmp_path}/de": {f"{tmp_path}/defs"},
    }
    for command in LEVELS:
        cases[_line(command, "")] = set(command.subcommands)
    for command in TREE.commands:
        cases[_line(command, "--")] = _long_flags(command)
    return cases


def _check(found: dict[str, list[str]], cases: dict[str, set[str]]) -> None:
    for line, expected in cases.items():
        offered = {c.rstrip("/") for c in found[line]}
        assert expected <= offered, f"{line!r}: missing {sorted(expected - offered)}"


def test_every_shell_gets_a_script_and_others_are_refused() -> None:
    for shell in SHELLS:
        assert "cortex" in script(build_parser(), shell)
    with pytest.raises(ValueError, match="bash, zsh, fish"):
        script(build_parser(), "powershell")


def test_the_tree_has_every_level_and_the_global_options() -> None:
    paths = {c.path for c in TREE.commands}
    assert {"", "node", "node start", "task submit", "dev", "completion"} <= paths
    assert {f for o in TREE.global_options for f in o.flags} == GLOBAL_FLAGS
    dev = next(c for c in TREE.commands if c.path == "dev")
    assert dev.positionals[0].value.words == ("start", "stop")


# -- bash ------------------------------------------------------------------------

# Bash splits COMP_WORDS on blanks and on the `=` and `:` of COMP_WORDBREAKS;
# the driver does the same, then calls the completion function as bash would.
_BASH_DRIVER = r"""
source "$1"
while IFS= read -r line; do
    COMP_LINE=$line
    COMP_POINT=${#line}
    read -r -a COMP_WORDS <<< "$(sed -E 's/([=:])/ \1 /g' <<< "$line")"
    [[ $line == *[[:space:]] ]] && COMP_WORDS+=("")
    COMP_CWORD=$((${#COMP_WORDS[@]} - 1))
    # Its second argument is the text readline replaces: after the last
    # blank, `=` or `:`.
    _cortex cortex "${line##*[[:space:]=:]}" "${COMP_WORDS[COMP_CWORD - 1]}"
    printf '%s\t\n' "$line"
    for candidate in "${COMPREPLY[@]}"; do printf '%s\t%s\n' "$line" "$candidate"; done
done
"""


def _bash(tmp_path: Path, lines: list[str]) -> dict[str, list[str]]:
    path = _script("bash", tmp_path)
    argv = ["bash", "-c", _BASH_DRIVER, "driver", str(path)]
    output = _run(argv, "\n".join(lines) + "\n", tmp_path)
    return _completions(output, lines)


def test_bash_script_is_valid_and_registers_the_function(tmp_path: Path) -> None:
    path = _script("bash", tmp_path)
    subprocess.run(["bash", "-n", str(path)], check=True, timeout=30)
    shown = subprocess.run(
        ["bash", "-c", f'source "{path}" && complete -p cortex'],
        capture_output=True, text=True, check=True, timeout=30,
    )  # fmt: skip
    assert shown.stdout.strip() == "complete -F _cortex cortex"


def test_bash_completes_every_level_its_options_and_values(tmp_path: Path) -> None:
    cases = _cases(tmp_path)
    found = _bash(tmp_path, list(cases))
    _check(found, cases)
    # Only what fits the word typed; nothing after a finished command.
    assert sorted(found["cortex t"]) == ["task", "top"]
    assert _bash(tmp_path, ["cortex dev start ", "cortex logs -f "]) == {
        "cortex dev start ": [],
        "cortex logs -f ": [],
    }


def test_bash_replies_relative_to_its_own_word_after_equals(tmp_path: Path) -> None:
    """Bash replaces the text after the last `=` or `:` only, so after
    `--consistency=` the replies are bare values."""
    lines = ["cortex task list --consistency=s", "cortex --consistency=", "cortex --tls-ca=./d"]
    (tmp_path / "defs").mkdir()
    found = _bash(tmp_path, lines)
    assert sorted(found["cortex task list --consistency=s"]) == ["session", "stale"]
    assert sorted(found["cortex --consistency="]) == ["linearizable", "session", "stale"]
    assert found["cortex --tls-ca=./d"] == ["./defs"]


# -- zsh -------------------------------------------------------------------------

# compsys is stubbed: each stub prints what it would offer, so the script's
# own logic runs in zsh on the `words` and `CURRENT` zsh would give it.
_ZSH_DRIVER = r"""
compdef() { : }
_describe() { local entry; for entry in "${(@P)4}"; do print -r -- "$line	${entry%%:*}"; done }
compadd() { local v; [[ $1 == -a ]] && for v in "${(@P)2}"; do print -r -- "$line	$prefix$v"; done }
compset() { [[ $1 == -P ]] && prefix=${words[CURRENT]%%=*}= }
_files() {
    local f
    for f in ${words[CURRENT]}*(N); do [[ -d $f ]] && f=$f/; print -r -- "$line	$f"; done
}
source "$1"
while IFS= read -r line; do
    words=(${(z)line})
    [[ $line == *[[:space:]] ]] && words+=('')
    CURRENT=${#words}
    prefix=''
    print -r -- "$line	"
    _cortex
done
"""


def _zsh(tmp_path: Path, lines: list[str]) -> dict[str, list[str]]:
    path = _script("zsh", tmp_path)
    argv = ["zsh", "-f", "-c", _ZSH_DRIVER, "driver", str(path)]
    output = _run(argv, "\n".join(lines) + "\n", tmp_path)
    return _completions(output, lines)


@needs_zsh
def test_zsh_script_is_valid(tmp_path: Path) -> None:
    subprocess.run(["zsh", "-n", str(_script("zsh", tmp_path))], check=True, timeout=30)


@needs_zsh
def test_zsh_completes_every_level_its_options_and_values(tmp_path: Path) -> None:
    cases = _cases(tmp_path)
    found = _zsh(tmp_path, list(cases))
    _check(found, cases)
    # (zsh itself narrows the candidates to the word typed: the stubs do not.)
    assert sorted(_zsh(tmp_path, ["cortex --consistency=s"])["cortex --consistency=s"]) == [
        "--consistency=linearizable",
        "--consistency=session",
        "--consistency=stale",
    ]


# -- fish ------------------------------------------------------------------------


def _fish(tmp_path: Path, lines: list[str]) -> dict[str, list[str]]:
    """Fish's own completion (`complete -C`) of each line."""
    path = _script("fish", tmp_path)
    driver = (
        f"source {path}\n"
        "while read -l line\n"
        '    printf "%s\\t\\n" $line\n'
        '    for candidate in (complete -C"$line")\n'
        '        printf "%s\\t%s\\n" $line $candidate\n'
        "    end\n"
        "end\n"
    )
    output = _run(["fish", "--no-config", "-c", driver], "\n".join(lines) + "\n", tmp_path)
    return _completions(output, lines)


@needs_fish
def test_fish_script_is_valid(tmp_path: Path) -> None:
    subprocess.run(["fish", "--no-execute", str(_script("fish", tmp_path))], check=True, timeout=30)


@needs_fish
def test_fish_completes_every_level_its_options_and_values(tmp_path: Path) -> None:
    cases = _cases(tmp_path)
    found = _fish(tmp_path, list(cases))
    _check(found, cases)
    assert sorted(found["cortex t"]) == ["task", "top"]
    assert sorted(_fish(tmp_path, ["cortex --consistency=s"])["cortex --consistency=s"]) == [
        "--consistency=session",
        "--consistency=stale",
    ]


def test_option_help_shows_in_zsh_and_fish_scripts(tmp_path: Path) -> None:
    """Descriptions come from the parser's help (with %(default)s expanded)."""
    for shell in ("zsh", "fish"):
        text = script(build_parser(), shell)
        assert "start a node in the foreground" in text
        assert not re.search(r"%\(\w+\)s", text)
