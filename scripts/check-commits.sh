#!/usr/bin/env bash
# Commit messages since the rule was set (issue 40): a subject of at most 72 characters,
# then a blank line and a body that says why. `git log --oneline` is a table of contents.
#
#   scripts/check-commits.sh          # every commit after RULE_SINCE up to HEAD
#
# Commits before RULE_SINCE are history and stay as they are.
set -euo pipefail
cd "$(dirname "$0")/.."
RULE_SINCE=b5af61add7f0f43f33d9fee6901071bf75910ffb   # main's head when the rule was adopted
MAX=72

if ! git cat-file -e "$RULE_SINCE^{commit}" 2>/dev/null; then
    echo "check-commits: $RULE_SINCE is not in this clone's history (shallow?); skipped"
    exit 0
fi
bad=0
while read -r sha; do
    subject=$(git log -1 --format=%s "$sha")
    body=$(git log -1 --format=%b "$sha" | sed '/^\s*$/d')
    if (( ${#subject} > MAX )); then
        echo "check-commits: ${sha:0:9}: subject is ${#subject} characters (at most $MAX): $subject"
        bad=1
    fi
    if [[ -z "$body" ]]; then
        echo "check-commits: ${sha:0:9}: no body (say why): $subject"
        bad=1
    fi
done < <(git rev-list --no-merges "$RULE_SINCE..HEAD")
exit "$bad"
