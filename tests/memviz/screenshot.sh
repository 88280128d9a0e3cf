#!/bin/sh
# Renders a memviz page in headless chromium and checks that a non-trivial PNG comes out.
# Skipped (77) when chromium is not installed. Usage: screenshot.sh CTORCH
set -u
ctorch=$1
browser=$(command -v chromium || command -v chromium-browser || command -v google-chrome || true)
[ -n "$browser" ] || { echo "chromium not installed: skipped"; exit 77; }
"$ctorch" memviz alloc_snapshot.pickle -o memviz_shot.html >/dev/null || exit 1
rm -f memviz_shot.png
timeout 120 "$browser" --headless --no-sandbox --disable-gpu --hide-scrollbars --window-size=1280,1300 \
  --screenshot="$PWD/memviz_shot.png" "file://$PWD/memviz_shot.html" >/dev/null 2>&1
[ -s memviz_shot.png ] || { echo "FAIL: no screenshot"; exit 1; }
size=$(wc -c < memviz_shot.png)
# a blank 1280x1300 page compresses to a few KiB; the chart and segment map do not
[ "$size" -gt 30000 ] || { echo "FAIL: screenshot is only $size bytes (blank page?)"; exit 1; }
echo "memviz screenshot: $PWD/memviz_shot.png ($size bytes)"
