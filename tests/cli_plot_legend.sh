#!/usr/bin/env bash
# cli_plot_legend.sh — `vdev plot` keeps its whole legend inside the picture:
# a memory picture of a trace with 3, 21 or 129 devices (as many as a process
# has) lists every device and the four keys, and every <text> (the legend's
# and the axes') lies inside the height its <svg> and viewBox give; a picture
# of a few devices keeps the usual 960x540, and more make it taller, never
# wider, as --help says. The placement picture too. Usage: cli_plot_legend.sh VDEV SHARED
set -u
vdev=$1
command -v python3 >/dev/null || { echo "python3 not found: skipped"; exit 77; }
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
. "${BASH_SOURCE%/*}/testlib.sh"

# inside.py FILE HEIGHT TEXT...: the <svg> is 960 wide and HEIGHT high (its
# width/height and its viewBox), each TEXT is a <text> of the picture, and no
# <text> has its baseline outside the picture (12 px font: y in [12, HEIGHT])
cat > "$tmp/inside.py" <<'PY'
import sys, xml.etree.ElementTree as E
ns = "{http://www.w3.org/2000/svg}"
root = E.parse(sys.argv[1]).getroot()
want_h, bad = sys.argv[2], []
box = root.get("viewBox", "").split()
if root.get("width") != "960" or len(box) != 4 or box[2] != "960":
    bad.append("width %s, viewBox %r: expected 960" % (root.get("width"), root.get("viewBox")))
if root.get("height") != want_h or len(box) != 4 or box[3] != want_h:
    bad.append("height %s, viewBox %r: expected %s"
               % (root.get("height"), root.get("viewBox"), want_h))
h = float(box[3]) if len(box) == 4 else 0
texts = [t for t in root.iter(ns + "text")]
for t in texts:
    y = float(t.get("y"))
    if not 12 <= y <= h:
        bad.append("text %r at y=%g is outside the picture's height %g" % (t.text, y, h))
names = set(t.text for t in texts)
for w in sys.argv[3:]:
    if w not in names: bad.append("no text %r" % w)
for b in bad[:5]: print("FAIL: %s: %s" % (sys.argv[1], b))
sys.exit(1 if bad else 0)
PY
inside() { python3 "$tmp/inside.py" "$@"; }
keys=("in use" reserved "peak in use" "out of memory")

# picture N HEIGHT: the memory picture of N devices is HEIGHT high, all of its
# legend inside
picture() {
  local n=$1 h=$2 last
  python3 "${BASH_SOURCE%/*}/plot_many_devices.py" "$n" "$tmp/t$n.json"
  last="/device:GPU:$((n - 2))"
  "$vdev" plot "$tmp/t$n.json" -o "$tmp/m$n.svg" && inside "$tmp/m$n.svg" "$h" "/device:CPU:0" \
    "$last" "${keys[@]}" && ok || bad "$n devices: memory picture"
  "$vdev" plot --placement "$tmp/t$n.json" -o "$tmp/p$n.svg" && inside "$tmp/p$n.svg" 540 \
    "MatMul (${n})" "$last" && ok || bad "$n devices: placement picture"
}
# 50 + 10 + 20 a device + 10 + 64 + 16 below the last key's baseline, at least 540
picture 3 540
picture 21 570
picture 129 2730
# every device's entry is in the legend, a row apart
python3 - "$tmp/m129.svg" <<'PY' && ok || bad "129 devices: legend rows"
import sys, xml.etree.ElementTree as E
ns = "{http://www.w3.org/2000/svg}"
ys = {t.text: float(t.get("y")) for t in E.parse(sys.argv[1]).getroot().iter(ns + "text")}
want = ["/device:CPU:0"] + ["/device:GPU:%d" % g for g in range(128)]
got = [ys.get(d) for d in want]
ok = got == [64.0 + 20 * i for i in range(129)]
if not ok: print("FAIL: legend rows at %s ... %s" % (got[:3], got[-2:]))
sys.exit(0 if ok else 1)
PY
help=$("$vdev" plot --help)
has "$help" "The picture is 960x540 pixels, taller where its legend (a row per device)
needs it." && ok || bad "plot --help does not say the picture grows: $help"
finish
