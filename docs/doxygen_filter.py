#!/usr/bin/env python3
"""Doxygen input filter for cuvmm's public headers (docs/Doxyfile, FILTER_PATTERNS).

Every public header opens with a plain `//` comment, "cuvmm/<path>: <summary>" followed by its
design note (what it owns, its invariants, what it never does). This filter turns that opening
comment into the header's file documentation: the summary's first sentence as the brief, the whole
note verbatim (its hand-made layout kept, nothing in it read as markup). Every other line passes
through unchanged, and the line count is kept, so warnings point at the real lines.

The two generated headers are read from their templates (cuvmm.hpp.in, version.hpp.in): Meson's
placeholders are filled as include/cuvmm/meson.build fills them (the version from CUVMM_VERSION,
which scripts/docs.sh sets; the umbrella's includes from the header list there), and the page is
named after the template.
"""
import os
import pathlib
import re
import sys


def umbrella_includes(header_list: pathlib.Path) -> str:
    """The umbrella's #include lines, as include/cuvmm/meson.build writes them."""
    lines = []
    for entry in re.findall(r"\{'path': '([^']+)'([^}]*)\}", header_list.read_text(encoding="utf-8")):
        if "'umbrella': false" not in entry[1]:
            lines.append(f"#include <cuvmm/{entry[0]}>")
    lines.append("#include <cuvmm/version.hpp>")
    return "\n".join(lines)


def fill_template(path: str, text: str) -> str:
    """Meson's @PLACEHOLDERS@ of a header template, filled."""
    version = os.environ.get("CUVMM_VERSION", "0.0.0")
    major, minor, patch = (version.split(".") + ["0", "0", "0"])[:3]
    values = {"VERSION": version, "VERSION_MAJOR": major, "VERSION_MINOR": minor, "VERSION_PATCH": patch}
    if "@INCLUDES@" in text:
        values["INCLUDES"] = umbrella_includes(pathlib.Path(path).parent / "meson.build")
    return re.sub(r"@([A-Z_]+)@", lambda m: values.get(m.group(1), m.group(0)), text)


def main(path: str) -> None:
    with open(path, encoding="utf-8") as f:
        text = f.read()
    template = path.endswith(".in")
    if template:
        text = fill_template(path, text)
    lines = text.split("\n")
    count = 0
    while count < len(lines) and lines[count].startswith("//") and not lines[count].startswith("///"):
        count += 1
    first = re.match(r"// (cuvmm/\S+\.hpp): (.*)$", lines[0]) if count else None
    if first is None:  # no design note in the house format: leave the file alone
        sys.stdout.write("\n".join(lines))
        return
    name = first.group(1) + (".in" if template else "")
    note = [first.group(2)] + [re.sub(r"^// ?", "", line) for line in lines[1:count]]
    flowing = " ".join(line.strip() for line in note)
    brief = re.match(r"(.*?\.)(\s|$)", flowing)
    brief_text = brief.group(1) if brief else flowing
    note[0] = f"/** \\file {name} \\brief {brief_text} \\details \\verbatim {note[0]}"
    note[-1] += " \\endverbatim */"
    sys.stdout.write("\n".join(note + lines[count:]))


if __name__ == "__main__":
    main(sys.argv[1])
