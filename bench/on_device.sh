#!/usr/bin/env bash
# The whole hardware check in one command, for the few minutes a GPU is lent (issue 21).
#
#   bench/on_device.sh [--out DIR] [--dry-run] [--steps a,b,...] [--archive FILE.tar.gz]
#
# Runs from a checkout with no install and no network (PYTHONPATH is set to the checkout) and
# finishes inside 9 minutes on an H100 or H200. Steps, each with its own time budget (a step past
# its budget is interrupted, then killed, and counts as FAIL; the next step still runs):
#   a-device-info      the device, driver, clocks (nvidia-smi, else cuda-python), ptxas/nvJitLink, commit
#   b-tests-gpu        tests/gpu on the real driver (the planted-race file runs in c)
#   c-planted-sm80     tests/gpu/test_gpu_planted.py: the cp.async races, observed rates on hardware
#   c-planted-sm90a    bench/planted_races.py: sm_90a plants the simulator flags, observed on hardware
#   d-device-vs-sim    bench/device_vs_sim.py: every design, s8->s32 bit for bit, floats elementwise
#   e-gemm-sm90a       bench/gemm.py --arch sm_90a: wgmma kernels vs cuBLAS (torch) and Triton
#   e-gemm-mma-sync    bench/gemm.py --arch <device's>: the mma.sync path vs cuBLAS and Triton
#   f-ablation-sm90a   bench/ablation_sm90.py: tile x cluster x epilogue x kernel, measured next to the cost
#                      model's prediction (its constants are fitted to these numbers)
#   g-cluster-probe    bench/cluster_probe.py: the cluster kernel's barrier scopes and wait hints, varied
# Everything goes to DIR/<date>-on-device-<commit>/ (DIR defaults to bench/results): one log per
# step, the JSON each step writes, and summary.txt, written after every step, one line per step
# with PASS/FAIL/SKIP, its seconds and budget. Exit status: 0 when no step failed, 1 otherwise
# (after every step ran), 2 for bad arguments. --archive also packs that folder into one file (the
# lent machine hands back at most 8 files). --steps runs only the steps whose names start with one
# of the given prefixes (e.g. --steps a,d); the others are listed as SKIP.
#
# --dry-run (any machine, no GPU, about a minute; its budgets are generous caps for loaded CI
# machines): every step through ptxgen's simulator-backed stand-in driver (PTXGEN_DRIVER=sim) on
# tiny problems; what only hardware can do is skipped and the step's log says why. CI runs it
# (tests/common/test_on_device_script.py).
#
# Budgets (seconds) can be changed for one run with BUDGET_<STEP>=N, the step's name in capitals
# with '_' for '-' (e.g. BUDGET_B_TESTS_GPU=200). BUDGET_TOTAL (default 500) caps the whole run: a
# step gets at most what is left of it, and one that would get under 10 s is skipped saying so.
set -u

usage() { sed -n '2,30p' "$0" | sed 's/^# \{0,1\}//'; }

OUT_ROOT=""
DRY_RUN=0
STEPS=""
ARCHIVE=""
while [ $# -gt 0 ]; do
  case "$1" in
    --steps) [ $# -ge 2 ] || { echo "on_device.sh: --steps needs a list such as a,d" >&2; exit 2; }
      STEPS="$2"; shift 2 ;;
    --steps=*) STEPS="${1#--steps=}"; shift ;;
    --archive) [ $# -ge 2 ] || { echo "on_device.sh: --archive needs a file name" >&2; exit 2; }
      ARCHIVE="$2"; shift 2 ;;
    --archive=*) ARCHIVE="${1#--archive=}"; shift ;;
    --out) [ $# -ge 2 ] || { echo "on_device.sh: --out needs a folder" >&2; exit 2; }; OUT_ROOT="$2"; shift 2 ;;
    --out=*) OUT_ROOT="${1#--out=}"; shift ;;
    --dry-run) DRY_RUN=1; shift ;;
    -h|--help) usage; exit 0 ;;
    *) echo "on_device.sh: unknown argument '$1' (use --out DIR, --dry-run, --steps, --archive)" >&2; exit 2 ;;
  esac
done

case "$ARCHIVE" in ""|/*) ;; *) ARCHIVE="$PWD/$ARCHIVE" ;; esac   # relative to where it was called
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
case "$OUT_ROOT" in ""|/*) ;; *) OUT_ROOT="$PWD/$OUT_ROOT" ;; esac
cd "$ROOT" || exit 2
OUT_ROOT="${OUT_ROOT:-$ROOT/bench/results}"
TOTAL="${BUDGET_TOTAL:-500}"
PY="${PYTHON:-python3}"
export PYTHONPATH="$ROOT${PYTHONPATH:+:$PYTHONPATH}"
export PYTHONUNBUFFERED=1
export PYTHONDONTWRITEBYTECODE=1
COMMIT="$(git rev-parse --short HEAD 2>/dev/null || echo "${PTXGEN_COMMIT:-unknown}")"
DATE="$(date -u +%Y-%m-%d)"
MODE=hardware
if [ "$DRY_RUN" = 1 ]; then
  MODE=dry-run
  export PTXGEN_DRIVER=sim   # every launch goes to the simulator behind the CUDA driver API
else
  export PTXGEN_DRIVER="${PTXGEN_DRIVER:-cuda}"   # NVIDIA's driver: tests/gpu must not fall back to the stand-in
fi
RUN_DIR="$OUT_ROOT/$DATE-on-device$([ "$DRY_RUN" = 1 ] && echo -dry-run)-$COMMIT"
[ -e "$RUN_DIR" ] && RUN_DIR="$RUN_DIR-$(date -u +%H%M%S)"
mkdir -p "$RUN_DIR" || { echo "on_device.sh: cannot create $RUN_DIR" >&2; exit 2; }
RUN_DIR="$(cd "$RUN_DIR" && pwd)"
export PTXGEN_GPU_REPORT="$RUN_DIR/gpu_report.jsonl"   # what tests/gpu records (gpu_helpers.record)
SUMMARY="$RUN_DIR/summary.txt"
START=$(date +%s)
ROWS=()
FAILED=()
SKIPPED=()

write_summary() {
  local total=$(( $(date +%s) - START ))
  {
    echo "ptxgen on-device check ($MODE)"
    echo "commit:  $(git rev-parse HEAD 2>/dev/null || echo "$COMMIT")"
    echo "started: $(date -u -d "@$START" '+%Y-%m-%d %H:%M:%S UTC' 2>/dev/null || echo "$START")"
    echo "folder:  $RUN_DIR"
    echo
    printf '%-17s %-6s %7s %7s  %s\n' step status seconds budget note
    local r
    for r in ${ROWS[@]+"${ROWS[@]}"}; do echo "$r"; done
    echo
    local skipped=""
    [ ${#SKIPPED[@]} -gt 0 ] && skipped="; skipped: ${SKIPPED[*]}"
    if [ ${#FAILED[@]} -eq 0 ]; then
      echo "result: PASS (${#ROWS[@]} steps, $total s$skipped)"
    else
      echo "result: FAIL (${FAILED[*]}; ${#ROWS[@]} steps, $total s$skipped)"
    fi
  } > "$SUMMARY"
}

time_left() { echo $(( TOTAL - ($(date +%s) - START) - 15 )); }   # of TOTAL, 15 s kept for a kill

budget_for() {  # budget_for STEP DEFAULT: BUDGET_<STEP> from the environment, else DEFAULT, at most time_left
  local var="BUDGET_$(echo "$1" | tr 'a-z-' 'A-Z_')"
  local want="${!var:-$2}" left; left="$(time_left)"
  [ "$left" -lt "$want" ] && want=$left
  echo "$want"
}

selected() {  # selected STEP: whether --steps names it (or --steps was not given)
  [ -z "$STEPS" ] && return 0
  local p
  for p in ${STEPS//,/ }; do case "$1" in "$p"*) return 0 ;; esac; done
  return 1
}

# run_step NAME BUDGET COMMAND...: run COMMAND with its output in NAME.log, interrupted (SIGINT, so
# pytest still writes its report) at BUDGET seconds and killed 15 s later; one summary row.
run_step() {
  local name="$1" budget; budget="$(budget_for "$1" "$2")"; shift 2
  local log="$RUN_DIR/$name.log" t0 rc status note
  if ! selected "$name"; then skip_step "$name" "not selected"; return; fi
  if [ "$(time_left)" -lt 10 ]; then
    skip_step "$name" "not run: the whole run's ${TOTAL}s (BUDGET_TOTAL) are spent"; return
  fi
  echo "== $name (budget ${budget}s): $*" | tee "$log"
  t0=$(date +%s)
  timeout -s INT -k 15 "$budget" "$@" >> "$log" 2>&1
  rc=$?
  local secs=$(( $(date +%s) - t0 ))
  note="$(grep -v '^[[:space:]]*$' "$log" | tail -n 1 | cut -c1-160)"
  if [ $rc -eq 0 ]; then
    status=PASS
  elif [ $rc -eq 124 ] || [ $rc -eq 137 ] || { [ $rc -eq 130 ] && [ $secs -ge "$budget" ]; }; then
    status=FAIL; note="timed out at its ${budget}s budget; last line: $note"
  elif [ $rc -eq 77 ]; then   # the step found nothing it could run here and said why in its log
    status=SKIP; SKIPPED+=("$name")
  else
    status=FAIL; note="exit $rc; last line: $note"
  fi
  [ "$status" = FAIL ] && FAILED+=("$name")
  ROWS+=("$(printf '%-17s %-6s %7s %7s  %s' "$name" "$status" "$secs" "$budget" "$note")")
  echo "== $name: $status in ${secs}s${note:+ ($note)}"
  write_summary
}

skip_step() {  # skip_step NAME REASON (or "not selected" when --steps leaves NAME out)
  if selected "$1"; then SKIPPED+=("$1"); else set -- "$1" "not selected (--steps $STEPS)"; fi
  ROWS+=("$(printf '%-17s %-6s %7s %7s  %s' "$1" SKIP 0 - "$2")")
  echo "== $1: SKIP ($2)" | tee -a "$RUN_DIR/$1.log"
  write_summary
}

write_summary
echo "on-device check ($MODE) of $COMMIT into $RUN_DIR"

# a: what this ran on
run_step a-device-info 25 "$PY" bench/device_info.py --out "$RUN_DIR/device_info.json"
if command -v nvidia-smi >/dev/null 2>&1; then
  { timeout 20 nvidia-smi; timeout 20 nvidia-smi -q -d CLOCK,PERFORMANCE,POWER; } > "$RUN_DIR/nvidia-smi.txt" 2>&1
fi

# The device's arch, for the steps that need sm_90 (stand-in: the H100 model's sm_90).
DEV_ARCH="$(timeout 60 "$PY" - <<'EOF' 2>/dev/null
from ptxgen.runtime import gpu_available
from ptxgen.runtime.driver import context
print(context().arch if gpu_available() else "none")
EOF
)"
DEV_ARCH="${DEV_ARCH:-none}"
if [ "$DRY_RUN" = 0 ] && [ "$DEV_ARCH" = none ]; then
  echo "on_device.sh: no GPU found (see a-device-info.log); the hardware steps will skip or fail:" \
       "use --dry-run on a machine without one" >&2
fi

# pyproject adds -q; junit_family xunit1 keeps the driver each test records (record_property) in the XML
PYTEST=("$PY" -m pytest -p no:cacheprovider -rA -o junit_family=xunit1)
if "$PY" -c "import pytest_timeout" >/dev/null 2>&1; then
  PYTEST+=(--timeout=120 --timeout-method=signal)   # one hung test must not eat the step
fi

# b: tests/gpu on the real driver (dry run: the launch path's own tests through the stand-in)
if [ "$DRY_RUN" = 1 ]; then
  run_step b-tests-gpu 90 "${PYTEST[@]}" tests/gpu/test_gpu_runtime.py --junitxml="$RUN_DIR/b-tests-gpu.xml"
else
  PARALLEL=()   # a file per worker: the hypothesis-heavy files run side by side on the one GPU
  "$PY" -c "import xdist" >/dev/null 2>&1 && PARALLEL=(-n 4 --dist loadfile)
  run_step b-tests-gpu 140 "${PYTEST[@]}" ${PARALLEL[@]+"${PARALLEL[@]}"} tests/gpu \
    --ignore=tests/gpu/test_gpu_planted.py --junitxml="$RUN_DIR/b-tests-gpu.xml"
fi

# c: planted races (the stand-in runs the simulator's half; the observed rates need hardware)
run_step c-planted-sm80 35 "${PYTEST[@]}" tests/gpu/test_gpu_planted.py --junitxml="$RUN_DIR/c-planted-sm80.xml"
if [ "$DRY_RUN" = 1 ]; then
  run_step c-planted-sm90a 120 "$PY" bench/planted_races.py --sim-only --out "$RUN_DIR/planted_races.json"
elif [ "$DEV_ARCH" = sm_90 ]; then
  run_step c-planted-sm90a 55 "$PY" bench/planted_races.py --out "$RUN_DIR/planted_races.json"
else
  skip_step c-planted-sm90a "the plants are sm_90a kernels; this device is $DEV_ARCH"
fi

# d: the simulator against the device, every design
if [ "$DRY_RUN" = 1 ]; then
  run_step d-device-vs-sim 120 "$PY" bench/device_vs_sim.py --tiny --workers 1 --out "$RUN_DIR/device_vs_sim.json"
else
  run_step d-device-vs-sim 70 "$PY" bench/device_vs_sim.py --workers 8 --budget-s 45 --out "$RUN_DIR/device_vs_sim.json"
fi

# e: throughput against cuBLAS and Triton (dry run: one candidate each through the stand-in)
if [ "$DRY_RUN" = 1 ]; then
  run_step e-gemm-sm90a 90 "$PY" bench/gemm.py --check-only --arch sm_90a --max-candidates 1 --dtypes f16
  run_step e-gemm-mma-sync 90 "$PY" bench/gemm.py --check-only --arch sm_90 --max-candidates 1 --dtypes f16
else
  MMA_ARCH="$DEV_ARCH"
  [ "$MMA_ARCH" = none ] && MMA_ARCH=sm_90
  if [ "$DEV_ARCH" = sm_90 ]; then
    # gemm.py starts no problem after --budget-s, and then needs time to finish one and print its table
    GEMM_BUDGET="$(budget_for e-gemm-sm90a 100)"
    run_step e-gemm-sm90a "$GEMM_BUDGET" "$PY" bench/gemm.py --arch sm_90a --max-problems 4 \
      --budget-s $(( GEMM_BUDGET > 45 ? GEMM_BUDGET - 45 : 0 )) --out "$RUN_DIR/gemm-sm_90a"
  else
    skip_step e-gemm-sm90a "wgmma kernels need sm_90; this device is $DEV_ARCH"
  fi
  GEMM_BUDGET="$(budget_for e-gemm-mma-sync 70)"
  run_step e-gemm-mma-sync "$GEMM_BUDGET" "$PY" bench/gemm.py --arch "$MMA_ARCH" --dtypes f16 --max-problems 3 \
    --budget-s $(( GEMM_BUDGET > 40 ? GEMM_BUDGET - 40 : 0 )) --out "$RUN_DIR/gemm-mma-sync"
fi

# f: the cost model against the device (dry run: the plan with every candidate's prediction)
if [ "$DRY_RUN" = 1 ]; then
  run_step f-ablation-sm90a 120 "$PY" bench/ablation_sm90.py --dry-run --problems f16:512 --ranked 2
  run_step g-cluster-probe 120 "$PY" bench/cluster_probe.py --dry-run
elif [ "$DEV_ARCH" = sm_90 ]; then
  ABL_BUDGET="$(budget_for f-ablation-sm90a 110)"
  run_step f-ablation-sm90a "$ABL_BUDGET" "$PY" bench/ablation_sm90.py --out "$RUN_DIR" \
    --budget-s $(( ABL_BUDGET > 50 ? ABL_BUDGET - 50 : 0 ))
  run_step g-cluster-probe 60 "$PY" bench/cluster_probe.py --out "$RUN_DIR"
else
  skip_step f-ablation-sm90a "wgmma kernels need sm_90; this device is $DEV_ARCH"
  skip_step g-cluster-probe "wgmma kernels need sm_90; this device is $DEV_ARCH"
fi

write_summary
echo
cat "$SUMMARY"
if [ -n "$ARCHIVE" ]; then
  tar -czf "$ARCHIVE" -C "$(dirname "$RUN_DIR")" "$(basename "$RUN_DIR")" && echo "packed into $ARCHIVE"
fi
[ ${#FAILED[@]} -eq 0 ]
