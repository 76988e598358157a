#!/usr/bin/env bash
# Render the demo's report.html and screenshot it with headless Chromium (docs/report-screenshot.png).
#   scripts/screenshot_report.sh [OUT.png]
set -euo pipefail
cd "$(dirname "$0")/.."
out="${1:-docs/report-screenshot.png}"
browser="$(command -v chromium || command -v chromium-browser || command -v google-chrome || true)"
[ -n "$browser" ] || { echo "screenshot_report.sh: no chromium on PATH (apt-get install chromium)" >&2; exit 2; }
.venv/bin/python - <<'PY'
from rag_judge import Pipeline

# report.json, report.md and report.html; each sample's drill-down shows it as evaluated
print(Pipeline.from_yaml("configs/demo.yaml").run().write("runs/demo")["html"])
PY
profile="$(mktemp -d)"
trap 'rm -rf "$profile"' EXIT
"$browser" --headless --no-sandbox --disable-gpu --disable-quic --no-first-run \
  --disable-background-networking --disable-component-update --disable-sync \
  --user-data-dir="$profile" --hide-scrollbars --window-size=1280,1800 \
  --screenshot="$PWD/$out" "file://$PWD/runs/demo/report.html" 2>/dev/null
echo "$out"
