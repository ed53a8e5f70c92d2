#!/usr/bin/env python3
"""Doxygen input filter for cuvmm's public headers (docs/Doxyfile, FILTER_PATTERNS).

Every public header opens with a plain `//` comment, "cuvmm/<path>: <summary>" followed by its
design note (what it owns, its invariants, what it never does). This filter turns that opening
comment into the header's file documentation: the summary's first sentence as the brief, the whole
note verbatim (its hand-made layout kept, nothing in it read as markup). Every other line passes
through unchanged, and the line count is kept, so warnings point at the real lines.
"""
import re
import sys


def main(path: str) -> None:
    with open(path, encoding="utf-8") as f:
        lines = f.read().split("\n")
    count = 0
    while count < len(lines) and lines[count].startswith("//") and not lines[count].startswith("///"):
        count += 1
    first = re.match(r"// (cuvmm/\S+\.hpp): (.*)$", lines[0]) if count else None
    if first is None:  # no design note in the house format: leave the file alone
        sys.stdout.write("\n".join(lines))
        return
    name = first.group(1)
    note = [first.group(2)] + [re.sub(r"^// ?", "", line) for line in lines[1:count]]
    flowing = " ".join(line.strip() for line in note)
    brief = re.match(r"(.*?\.)(\s|$)", flowing)
    brief_text = brief.group(1) if brief else flowing
    note[0] = f"/** \\file {name} \\brief {brief_text} \\details \\verbatim {note[0]}"
    note[-1] += " \\endverbatim */"
    sys.stdout.write("\n".join(note + lines[count:]))


if __name__ == "__main__":
    main(sys.argv[1])
