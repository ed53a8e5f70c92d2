#!/usr/bin/env python3
"""Counts test cases from the Catch2 XML reports that cuvmm's test programs write.

Meson counts test programs; this counts the test cases inside them, and lists every skip with
its reason, so a reader sees how many checks ran and how many were skipped (e.g. for lack of a
GPU). The last line is "tests: N passed, N failed, N skipped". Exit status 1 if any failed or a
program wrote no report.
"""
import sys
import xml.etree.ElementTree as ET
from pathlib import Path


def main() -> int:
    if len(sys.argv) < 2:
        print("usage: test-summary.py RESULTS_DIR [RESULTS_DIR...]", file=sys.stderr)
        return 2
    reports = sorted(p for d in sys.argv[1:] for p in Path(d).glob("*.xml"))
    if not reports:
        print("test-summary: no Catch2 reports found in " + ", ".join(sys.argv[1:]))
        return 1
    totals = {"passed": 0, "failed": 0, "skipped": 0}
    skips = []
    broken = []
    rows = []
    for report in reports:
        label = f"{report.parent.parent.name}/{report.stem}"
        try:
            root = ET.parse(report).getroot()
        except ET.ParseError as error:
            broken.append(f"{label}: unreadable report ({error})")
            continue
        cases = root.find("OverallResultsCases")
        if cases is None:
            broken.append(f"{label}: report has no totals (did the program crash?)")
            continue
        passed = int(cases.get("successes", 0))
        failed = int(cases.get("failures", 0)) + int(cases.get("expectedFailures", 0))
        skipped = int(cases.get("skips", 0))
        totals["passed"] += passed
        totals["failed"] += failed
        totals["skipped"] += skipped
        rows.append((label, passed, failed, skipped))
        for case in root.iter("TestCase"):
            for skip in case.iter("Skip"):
                reason = (skip.text or "").strip()
                skips.append((label, case.get("name"), reason))
    width = max(len(r[0]) for r in rows) if rows else 10
    print(f"{'program':<{width}}  passed  failed  skipped")
    for label, passed, failed, skipped in rows:
        print(f"{label:<{width}}  {passed:>6}  {failed:>6}  {skipped:>7}")
    if skips:
        # One line per reason (e.g. "no CUDA driver: ..."), with the programs it applied to.
        by_reason = {}
        for program, case, reason in skips:
            by_reason.setdefault(reason, []).append((program, case))
        print(f"\nskipped test cases ({len(skips)}), by reason:")
        for reason, cases in by_reason.items():
            programs = sorted({p for p, _ in cases})
            print(f"  {len(cases)} skipped: {reason}")
            print(f"    in {', '.join(programs)}")
    for line in broken:
        print("ERROR " + line)
    print(f"\ntests: {totals['passed']} passed, {totals['failed']} failed, {totals['skipped']} skipped")
    return 1 if totals["failed"] or broken else 0


if __name__ == "__main__":
    sys.exit(main())
