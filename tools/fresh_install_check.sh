#!/usr/bin/env bash
# Install caliper-jax into a FRESH virtual environment, the way a user would (no editable
# install, no test extra), and run every CLI verb from outside the source tree:
#
#   1. `pip install .` with no extras: `caliper info` and `caliper demo` run, every verb runs on the
#      `collide_arm` fixture;
#   2. in the same venv every verb runs on panda (example-robot-data is a runtime dependency), and
#      `caliper check panda` reports every mesh link covered (only links without any collision
#      geometry may be uncovered).
#
# Not part of the default test suite (it downloads and installs the whole stack: ~10 minutes).
# Usage: bash tools/fresh_install_check.sh [VENV_DIR]   (default /tmp/freshvenv; rebuilt each run)
# Exit 0 when every verb passed; 1 with the failing verbs listed; logs under $VENV_DIR/logs.
set -uo pipefail
SRC=$(cd "$(dirname "$0")/.." && pwd)
VENV=${1:-/tmp/freshvenv}
PY=${PYTHON:-python3}
export PIP_DISABLE_PIP_VERSION_CHECK=1

rm -rf "$VENV"
"$PY" -m venv "$VENV" || exit 1
LOGS=$VENV/logs
WORK=$VENV/work
COPY=$VENV/src
mkdir -p "$LOGS" "$WORK" "$COPY"

# A copy of the working tree (tracked and untracked-but-not-ignored files): the install must not
# see .venv, build/ or egg-info folders of the checkout, and must not write into it.
(cd "$SRC" && git ls-files -co --exclude-standard -z | xargs -0 cp --parents -t "$COPY") || exit 1

echo "== pip install $SRC (no extras) into $VENV"
"$VENV/bin/pip" install -q "$COPY" > "$LOGS/pip.log" 2>&1 || { tail -20 "$LOGS/pip.log"; exit 1; }
CALIPER=$VENV/bin/caliper
cd "$WORK" || exit 1   # never import from the source tree

failed=()
passed=()
# run NAME EXPECT_RC COMMAND...: run one verb, keep its output, record the outcome.
run() {
  local name=$1 expect=$2; shift 2
  local log="$LOGS/${name// /_}.log"
  if declare -F "$1" > /dev/null; then "$@" > "$log" 2>&1; else timeout 900 "$@" > "$log" 2>&1; fi
  local rc=$?
  if [ "$rc" -eq "$expect" ] && ! grep -q "^Traceback" "$log"; then
    passed+=("$name"); printf '  ok    %-28s\n' "$name"
  else
    failed+=("$name (rc $rc)"); printf '  FAIL  %-28s rc=%s: %s\n' "$name" "$rc" "$(tail -1 "$log")"
  fi
}

verbs() {  # verbs ROBOT Q GOAL X,Y,Z: every verb that takes a robot (X,Y,Z: the tool at GOAL)
  local r=$1 q=$2 goal=$3 tag=$1
  run "$tag load" 0 "$CALIPER" load "$r"
  run "$tag fk" 0 "$CALIPER" fk "$r" --joints "$q"
  run "$tag sim" 0 "$CALIPER" sim "$r" --duration 0.1 --damping 0.5
  run "$tag ik" 0 "$CALIPER" ik "$r" --position "$4" --restarts 2 --max-iters 50
  run "$tag analyze" 0 "$CALIPER" analyze "$r" --joints "$q"
  run "$tag move" 0 "$CALIPER" move "$r" --goal "$goal"
  run "$tag report" 0 "$CALIPER" report "$r" --goal "$goal"
  run "$tag check" 0 "$CALIPER" check "$r" --joints "$q" --json
  run "$tag plan" 0 "$CALIPER" plan "$r" --start "$q" --goal "$goal" --seed 0 --max-iterations 2000
  run "$tag trajopt" 0 "$CALIPER" trajopt "$r" --start "$q" --goal "$goal" --iterations 20 --inits 2
  run "$tag control" 0 "$CALIPER" control "$r" --q0 "$q" --goal "$goal"
  run "$tag record" 0 "$CALIPER" record "$r" --goal "$goal" --ticks 20 --out "$WORK/$tag-dataset"
  run "$tag mjcf" 0 "$CALIPER" mjcf "$r" --out "$WORK/$tag.xml" --check
  run "$tag load-mjcf" 0 "$CALIPER" load "$WORK/$tag.xml"
  run "$tag contact-sim" 0 "$CALIPER" contact-sim "$r" --duration 0.1 --ground 0
  run "$tag contact-lint" 0 "$CALIPER" contact-lint "$r"
  run "$tag doctor" 0 "$CALIPER" doctor "$r"
}

# every mesh collider becomes a hull: only links without collision geometry may be uncovered
covered() {
  "$VENV/bin/python" - "$LOGS/$1_check.log" <<'EOF'
import json, sys
report = json.load(open(sys.argv[1]))
bad = [u for u in report["uncovered"] if u["reason"] != "no collision geometry"]
print("uncovered mesh links:", bad or "none")
sys.exit(1 if bad else 0)
EOF
}

echo "== without extras"
run "info" 0 "$CALIPER" info
run "demo" 0 "$CALIPER" demo --duration 0.2
verbs collide_arm "0.1 -0.2 0.1" "0.5 0.3 -0.2" "0.359,0.0,0.4723"
run "collide_arm covered" 0 covered collide_arm
echo "== on panda (example-robot-data)"
run "info lists panda" 0 bash -c "'$CALIPER' info | grep -qw panda"
PANDA_Q="0 -0.3 0 -2.0 0 1.8 0.8 0.02"
PANDA_GOAL="0.3 -0.1 0.2 -1.8 0.1 1.9 0.6 0.03"
verbs panda "$PANDA_Q" "$PANDA_GOAL" "0.4912,0.2909,0.4986"
run "panda covered" 0 covered panda
run "panda mjcf round trip nq" 0 bash -c "'$CALIPER' load '$WORK/panda.xml' --json | '$VENV/bin/python' -c 'import json,sys; d=json.load(sys.stdin); sys.exit(0 if d[\"nq\"] == 8 else 1)'"

echo
echo "${#passed[@]} passed, ${#failed[@]} failed"
for f in "${failed[@]}"; do echo "  failed: $f"; done
[ "${#failed[@]}" -eq 0 ]
