#!/usr/bin/env bash
# Open DIR/report.html in headless Chromium and save a screenshot, to check every figure is drawn.
#
#   scripts/screenshot_report.sh DIR [OUT.png]      (default OUT: DIR/report.png)
#
# Also writes DIR/report.dom.html (the DOM after the page's scripts ran) and prints how many
# figures (<svg>) and "no data" placeholders it holds. Needs /usr/bin/chromium
# (Debian: apt-get install -y chromium). No network is used: the report is self-contained.
set -euo pipefail

dir=${1:?usage: scripts/screenshot_report.sh DIR [OUT.png]}
report="$(cd "$dir" && pwd)/report.html"
out=${2:-$dir/report.png}
chromium=${CHROMIUM:-/usr/bin/chromium}

if [[ ! -f $report ]]; then
    echo "error: $report does not exist" >&2
    echo "hint: run compile-tune (or compile-tune report DIR) first" >&2
    exit 2
fi
if [[ ! -x $chromium ]]; then
    echo "error: $chromium not found" >&2
    echo "hint: apt-get install -y chromium, or set CHROMIUM=/path/to/chromium" >&2
    exit 2
fi

profile=$(mktemp -d)
trap 'rm -rf "$profile"' EXIT
flags=(--headless --no-sandbox --disable-gpu --disable-quic --no-first-run --disable-background-networking
       --disable-component-update --disable-sync --user-data-dir="$profile" --hide-scrollbars)

"$chromium" "${flags[@]}" --window-size=1400,4000 --screenshot="$(realpath -m "$out")" "file://$report" \
    >/dev/null 2>&1
"$chromium" "${flags[@]}" --dump-dom "file://$report" 2>/dev/null >"$dir/report.dom.html"

svgs=$( { grep -o "<svg" "$dir/report.dom.html" || true; } | wc -l)
empty=$( { grep -o "class=\"empty\"" "$dir/report.dom.html" || true; } | wc -l)
echo "$out: $(stat -c %s "$out") bytes; $svgs figures drawn, $empty without data"
