#!/usr/bin/env bash
# Fails when systemd's rating of a service unit's sandbox is worse than
# the limit: `systemd-analyze security` reads the unit file itself
# (--offline), so nothing needs to be installed or running.
#
#   packaging/unit-exposure.sh [unit file] [most exposure]
#   (default packaging/systemd/hetsched.service, 4.0)
#
# Exit 0 and one line with the figure when it is within the limit; 1 when
# it is above it or cannot be rated; 2 when systemd-analyze is absent.
set -euo pipefail
unit=${1:-"$(dirname "$0")/systemd/hetsched.service"}
limit=${2:-4.0}
if ! command -v systemd-analyze >/dev/null; then
    echo "unit exposure: systemd-analyze not found, $unit not rated" >&2
    exit 2
fi
out=$(systemd-analyze security --offline=true --no-pager "$unit" 2>&1) || true
exposure=$(sed -n 's/.*Overall exposure level for [^:]*: \([0-9][0-9.]*\).*/\1/p' <<<"$out" | tail -1)
if [ -z "$exposure" ]; then
    echo "unit exposure: systemd-analyze security could not rate $unit:" >&2
    echo "$out" >&2
    exit 1
fi
if awk -v e="$exposure" -v l="$limit" 'BEGIN { exit !(e > l) }'; then
    echo "unit exposure: $unit is rated $exposure by systemd-analyze security, above $limit; what it lacks:" >&2
    grep '^✗' <<<"$out" | sed 's/^/  /' >&2 || true
    exit 1
fi
echo "unit exposure: $unit is rated $exposure (at most $limit)"
