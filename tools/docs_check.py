"""Check README.md and docs/*.md: every relative link resolves and every documented command exists.

Docs rot quietly: a page is renamed and a link elsewhere 404s on GitHub, a flag is renamed and
the example that shows it fails when a user pastes it. This fails (exit 1, one line per problem)
on:

- a relative link (`[text](path)`, `[text](path#anchor)`, `[text](#anchor)`, images too) whose
  file does not exist, or whose anchor is no heading of the target Markdown file (GitHub's
  heading slugs: lower case, punctuation dropped, spaces to hyphens, `-1`, `-2` for repeats);
- a command in a ```sh, ```bash, ```shell or ```console block (console: the lines after a `$ `
  prompt) that calltap does not know: `calltap SUBCOMMAND --flag ...` with a subcommand or a
  flag its argparse parser does not accept, or `make TARGET` with a target the Makefile lacks.

Run from the project root: `python tools/docs_check.py` (`make docs-check`; `make test` runs it).
"""

from __future__ import annotations

import argparse
import re
import shlex
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

COMMAND_LANGUAGES = frozenset({"sh", "bash", "shell", "console"})
OPERATORS = frozenset({"|", "||", "&&", ";", "&"})
FENCE = re.compile(r"^\s*(`{3,}|~{3,})\s*([\w+-]*)")
HEADING = re.compile(r"^ {0,3}(#{1,6})\s+(.*?)\s*#*\s*$")
LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*(<[^>]*>|[^)\s]+)(?:\s+\"[^\"]*\")?\s*\)")
CODE_SPAN = re.compile(r"(`+)(?:.+?)\1")
HTML_ANCHOR = re.compile(r"<a\s+(?:name|id)=\"([^\"]+)\"")
SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:|^//")
FLAG = re.compile(r"--?[A-Za-z][A-Za-z0-9-]*")
MAKE_RULE = re.compile(r"^([^\s#:=][^:=]*?)\s*::?(?!=)")
MAKE_VARIABLE = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)\s*(?::=|\?=|=)\s*(.*)$")


@dataclass(frozen=True, slots=True)
class Problem:
    """One broken link or unknown command, located in its file."""

    path: Path
    line: int
    message: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.message}"


@dataclass(frozen=True, slots=True)
class Block:
    """A fenced code block: its info string and its lines, each with its line number."""

    language: str
    lines: tuple[tuple[int, str], ...]


def split_markdown(text: str) -> tuple[list[tuple[int, str]], list[Block]]:
    """The prose lines (outside fences) and the fenced blocks of a Markdown text."""
    prose: list[tuple[int, str]] = []
    blocks: list[Block] = []
    fence: str | None = None
    language = ""
    body: list[tuple[int, str]] = []
    for number, line in enumerate(text.splitlines(), start=1):
        match = FENCE.match(line)
        if fence is None and match:
            fence, language, body = match.group(1), match.group(2).lower(), []
        elif fence is not None and _closes(line, fence):
            blocks.append(Block(language, tuple(body)))
            fence = None
        elif fence is not None:
            body.append((number, line))
        else:
            prose.append((number, line))
    return prose, blocks


def _closes(line: str, fence: str) -> bool:
    """A closing fence: the opening's character, at least as many, and nothing else."""
    text = line.strip()
    return text.startswith(fence) and not text.strip(fence[0])


def slug(heading: str) -> str:
    """GitHub's anchor for a heading's text: the rendered text lower-cased, punctuation
    dropped (hyphens and underscores kept), each space a hyphen."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)
    text = re.sub(r"<[^>]+>", "", text).replace("`", "").replace("*", "")
    text = re.sub(r"[^\w\- ]", "", text.lower())
    return text.replace(" ", "-")


def anchors(text: str) -> set[str]:
    """Every anchor a Markdown file offers: its headings' slugs (repeats numbered) and the
    explicit `<a name=...>` / `<a id=...>`."""
    prose, _ = split_markdown(text)
    seen: dict[str, int] = {}
    found: set[str] = set()
    for _, line in prose:
        found.update(HTML_ANCHOR.findall(line))
        match = HEADING.match(line)
        if match is None:
            continue
        base = slug(match.group(2))
        count = seen.get(base, 0)
        seen[base] = count + 1
        found.add(base if count == 0 else f"{base}-{count}")
    return found


def check_links(path: Path, root: Path, cache: dict[Path, set[str]]) -> Iterator[Problem]:
    """Each relative link of one Markdown file whose target or anchor is missing."""
    prose, _ = split_markdown(path.read_text(encoding="utf-8"))
    for number, line in prose:
        for match in LINK.finditer(CODE_SPAN.sub("", line)):
            target = match.group(1).strip("<>")
            if SCHEME.match(target):
                continue
            file_part, _, anchor = target.partition("#")
            resolved = (path.parent / file_part).resolve() if file_part else path.resolve()
            shown = _relative(path, root)
            if not resolved.exists():
                yield Problem(shown, number, f"broken link {target!r}: no file {file_part!r}")
                continue
            if not anchor or resolved.suffix.lower() != ".md" or not resolved.is_file():
                continue
            if resolved not in cache:
                cache[resolved] = anchors(resolved.read_text(encoding="utf-8"))
            if anchor not in cache[resolved]:
                yield Problem(shown, number,
                              f"broken link {target!r}: no heading with anchor #{anchor}")


def _relative(path: Path, root: Path) -> Path:
    try:
        return path.resolve().relative_to(root.resolve())
    except ValueError:
        return path


def command_lines(block: Block) -> Iterator[tuple[int, str]]:
    """The shell command lines of a block, continuation lines joined: after a trailing `\\`,
    and a usage line's options wrapped onto lines of their own (`    [--json] [--redact]`). A
    console block's commands are the lines after a `$ ` prompt, the rest being output."""
    merged: list[tuple[int, str]] = []
    for number, line in _logical_lines(block):
        if merged and line.lstrip().startswith(("[-", "(-", "-")):
            merged[-1] = (merged[-1][0], f"{merged[-1][1]} {line.strip()}")
        else:
            merged.append((number, line))
    yield from merged


def _logical_lines(block: Block) -> Iterator[tuple[int, str]]:
    console = block.language == "console"
    pending: tuple[int, str] | None = None
    for number, raw in block.lines:
        line = raw.rstrip()
        if pending is None:
            if console:
                if not line.lstrip().startswith("$ "):
                    continue
                line = line.lstrip()[2:]
            pending = (number, "")
        if line.endswith("\\"):
            pending = (pending[0], pending[1] + line[:-1] + " ")
            continue
        yield pending[0], pending[1] + line
        pending = None
    if pending is not None:
        yield pending


def tokens(line: str) -> list[str]:
    """Shell words of a line, comments dropped; a line shlex cannot read is split on spaces."""
    lexer = shlex.shlex(line, posix=True)
    lexer.whitespace_split = True
    lexer.commenters = "#"
    try:
        return list(lexer)
    except ValueError:
        return line.split("#", 1)[0].split()


def simple_commands(words: list[str]) -> Iterator[list[str]]:
    """The simple commands of a pipeline or list. An operator followed by a flag stays inside
    the command: usage lines write alternatives as `(--gateway URL | --demo-gateway)`."""
    current: list[str] = []
    for index, word in enumerate(words):
        following = words[index + 1] if index + 1 < len(words) else ""
        if word in OPERATORS and not following.lstrip("([").startswith("-"):
            yield current
            current = []
        else:
            current.append(word)
    yield current


def program(words: list[str]) -> tuple[str, list[str]]:
    """The program's base name and its arguments, skipping leading `NAME=value` assignments."""
    index = 0
    while index < len(words) and re.match(r"^[A-Za-z_][A-Za-z0-9_]*=", words[index]):
        index += 1
    if index == len(words):
        return "", []
    return words[index].rsplit("/", 1)[-1], words[index + 1:]


class Cli:
    """What calltap's argparse parsers accept: each subcommand and its option strings."""

    def __init__(self) -> None:
        from calltap import cli

        self.options: dict[str, frozenset[str]] = {}
        self.top = frozenset({"--version", "-h", "--help"})
        for name in cli.COMMANDS:
            parser = cli.build_parser(name)
            sub = next(action for action in parser._actions
                       if isinstance(action, argparse._SubParsersAction))
            self.options[name] = frozenset(
                option for action in sub.choices[name]._actions for option in action.option_strings)

    def problems(self, arguments: list[str]) -> Iterator[str]:
        """Why `calltap ARGUMENTS` would be refused (its flags read where argparse reads them)."""
        if not arguments or arguments[0].startswith("-"):
            unknown = [flag for flag in _flags(arguments) if flag not in self.top]
            yield from (f"calltap has no option {flag}" for flag in unknown)
            return
        command, rest = arguments[0], arguments[1:]
        if command not in self.options:
            yield f"calltap has no subcommand {command!r}"
            return
        for flag in _flags(rest):
            if flag not in self.options[command]:
                yield f"calltap {command} has no option {flag}"


def _flags(arguments: list[str]) -> list[str]:
    """The option names among arguments, usage brackets and `=value` stripped."""
    flags = []
    for word in arguments:
        match = FLAG.match(word.lstrip("[("))
        if match and word.lstrip("[(").startswith("-"):
            flags.append(match.group(0))
    return flags


def make_targets(makefile: Path) -> list[re.Pattern[str]]:
    """The Makefile's targets as patterns (`%` matches anything), simple variables expanded."""
    variables: dict[str, str] = {}
    names: list[str] = []
    for line in makefile.read_text(encoding="utf-8").splitlines():
        if line.startswith("\t"):
            continue
        assignment = MAKE_VARIABLE.match(line)
        if assignment:
            variables[assignment.group(1)] = assignment.group(2).split("#", 1)[0].strip()
            continue
        rule = MAKE_RULE.match(line)
        if rule:
            names.extend(_expand(rule.group(1), variables).split())
    return [re.compile(re.escape(name).replace("%", ".+") + "$")
            for name in names if "$" not in name]


def _expand(text: str, variables: dict[str, str], depth: int = 0) -> str:
    if depth > 10:
        return text
    expanded = re.sub(r"\$\(([A-Za-z_][A-Za-z0-9_]*)\)",
                      lambda match: variables.get(match.group(1), match.group(0)), text)
    return expanded if expanded == text else _expand(expanded, variables, depth + 1)


def check_commands(path: Path, root: Path, cli: Cli,
                   targets: list[re.Pattern[str]]) -> Iterator[Problem]:
    """Each `calltap` or `make` command of a Markdown file's shell blocks that would fail."""
    _, blocks = split_markdown(path.read_text(encoding="utf-8"))
    shown = _relative(path, root)
    for block in blocks:
        if block.language not in COMMAND_LANGUAGES:
            continue
        for number, line in command_lines(block):
            for words in simple_commands(tokens(line)):
                name, arguments = program(words)
                if name == "calltap":
                    for message in cli.problems(arguments):
                        yield Problem(shown, number, f"{message}: {' '.join(line.split())}")
                elif name == "make":
                    for target in (word for word in arguments
                                   if not word.startswith("-") and "=" not in word):
                        if not any(pattern.match(target) for pattern in targets):
                            yield Problem(shown, number, f"the Makefile has no target {target!r}")


def markdown_files(root: Path) -> list[Path]:
    """README.md and every docs/*.md."""
    readme = root / "README.md"
    return ([readme] if readme.exists() else []) + sorted((root / "docs").glob("*.md"))


def check(root: Path) -> list[Problem]:
    """Every problem in the project's documentation under root."""
    cli = Cli()
    makefile = root / "Makefile"
    targets = make_targets(makefile) if makefile.exists() else []
    cache: dict[Path, set[str]] = {}
    problems: list[Problem] = []
    for path in markdown_files(root):
        problems.extend(check_links(path, root, cache))
        problems.extend(check_commands(path, root, cli, targets))
    return problems


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("root", nargs="?", type=Path, default=Path("."),
                        help="the project root (default: the working directory)")
    args = parser.parse_args(argv)
    problems = check(args.root)
    for problem in problems:
        print(problem)
    files = len(markdown_files(args.root))
    print(f"docs-check: {files} files, {len(problems)} problems", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
