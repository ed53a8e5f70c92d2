"""Prints the files in DIR whose names match PATTERN, sorted, one a line (Meson has no glob).

    python3 tools/sources.py DIR PATTERN      e.g. tools/sources.py csrc/allocator '*.cpp'

DIR as given (Meson passes an absolute one). A missing DIR lists nothing.
"""
import glob
import os
import sys

directory, pattern = sys.argv[1:]
for path in sorted(glob.glob(os.path.join(directory, pattern))):
    if os.path.isfile(path):
        print(path)
