#!/usr/bin/env python3
"""Checks that every C++ snippet in README.md and the docs is the "// [readme]" lines of its example program.

In each Markdown file, each ```cpp block follows a line `<!-- example: examples/FILE -->` (a path from
the repository root). In FILE, lines
between a pair of `// [readme]` marker lines are quoted; several pairs are joined with one blank line,
and each quoted part loses its common indentation. A snippet that differs from its file, a cpp block
without a named example, or a named file without markers is an error.

Usage: check_readme_examples.py [FILE.md...]   (default README.md and docs/*.md; exit 0: all identical;
       1: a difference, printed as a diff)
"""
import difflib
import pathlib
import re
import sys

MARKER = "// [readme]"
ROOT = pathlib.Path(__file__).resolve().parent.parent
NAME = re.compile(r"^<!-- example: (\S+) -->$")


def quoted(path: pathlib.Path) -> list[str]:
    """The lines of `path` that the README quotes."""
    parts: list[list[str]] = []
    inside = False
    for line in path.read_text(encoding="utf-8").split("\n"):
        if line.strip() == MARKER:
            inside = not inside
            if inside:
                parts.append([])
        elif inside:
            parts[-1].append(line)
    if inside:
        raise ValueError(f"{path}: a '{MARKER}' region is not closed")
    if not parts:
        raise ValueError(f"{path}: no '{MARKER}' region")
    out: list[str] = []
    for part in parts:
        indent = min((len(l) - len(l.lstrip(" ")) for l in part if l.strip()), default=0)
        if out:
            out.append("")
        out.extend(l[indent:] for l in part)
    return out


def check(readme: pathlib.Path) -> tuple[int, int]:
    """Checks one Markdown file: (snippets identical to their examples, errors)."""
    lines = readme.read_text(encoding="utf-8").split("\n")
    name_of = readme.relative_to(ROOT) if readme.is_relative_to(ROOT) else readme
    errors = 0
    checked = 0
    i = 0
    while i < len(lines):
        if lines[i].strip() in ("```cpp", "```c++"):
            start = i
            end = next(j for j in range(i + 1, len(lines)) if lines[j].strip() == "```")
            snippet = lines[start + 1:end]
            name = NAME.match(lines[start - 1].strip()) if start > 0 else None
            if name is None:
                print(f"{name_of}:{start + 1}: a C++ snippet without '<!-- example: examples/FILE -->' above it")
                errors += 1
            else:
                try:
                    expected = quoted(ROOT / name.group(1))
                except (OSError, ValueError) as error:
                    print(f"{name_of}:{start + 1}: {error}")
                    errors += 1
                else:
                    if snippet == expected:
                        checked += 1
                    else:
                        errors += 1
                        print(f"{name_of}:{start + 1}: the snippet differs from {name.group(1)}:")
                        sys.stdout.writelines(
                            l + "\n" for l in difflib.unified_diff(expected, snippet, name.group(1), str(name_of), lineterm=""))
            i = end
        i += 1
    return checked, errors


def main() -> int:
    files = [pathlib.Path(a).resolve() for a in sys.argv[1:]] or \
        [ROOT / "README.md"] + sorted((ROOT / "docs").glob("*.md"))
    checked = errors = 0
    for readme in files:
        c, e = check(readme)
        checked += c
        errors += e
    print(f"C++ snippets in {len(files)} Markdown file(s): {checked} identical to their examples, {errors} error(s)")
    if checked == 0 and errors == 0:
        print("no C++ snippet found")
        return 1
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
