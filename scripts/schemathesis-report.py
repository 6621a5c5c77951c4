#!/usr/bin/env python3
"""What a schemathesis run found, from its NDJSON report: the requests made, and each finding
(check code and operation) either listed in the known-findings file, with its reason, or new.

    scripts/schemathesis-report.py KNOWN REPORT.ndjson   # exit 1 on a finding not listed
"""

import json
import sys
from collections import Counter


def known(path):
    listed = {}
    for line in open(path, encoding="utf-8"):
        line = line.strip()
        if line and not line.startswith("#"):
            finding, _, reason = line.partition("  ")
            listed[finding.strip()] = reason.strip()
    return listed


def main(known_path, report_path):
    requests, found = 0, Counter()
    for line in open(report_path, encoding="utf-8"):
        event = json.loads(line)
        scenario = event.get("ScenarioFinished")
        if not scenario:
            continue
        recorder = scenario.get("recorder", {})
        requests += len(recorder.get("interactions", {}))
        for checks in recorder.get("checks", {}).values():
            for check in checks:
                failure = (check.get("failure_info") or {}).get("failure")
                if check.get("status") == "failure" and failure:
                    found[f"{failure['code']} {failure['operation']}"] += 1
    listed = known(known_path)
    new = sorted(f for f in found if f not in listed)
    print(f"schemathesis: {requests} requests, {len(found)} findings ({len(found) - len(new)} listed, {len(new)} new)")
    for finding in sorted(found):
        print(f"  {'listed' if finding in listed else 'NEW   '} {finding}: {listed.get(finding, 'see the run')}")
    for finding in sorted(set(listed) - set(found)):
        print(f"  not seen this run: {finding}")
    if requests == 0:
        print("schemathesis made no request", file=sys.stderr)
        return 1
    return 1 if new else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2]))
