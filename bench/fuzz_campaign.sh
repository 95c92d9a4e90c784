#!/usr/bin/env bash
# Fuzz campaigns in chunks under one deadline, for the few minutes a many-core machine is lent.
#
#   bench/fuzz_campaign.sh OUT_DIR DEADLINE_S WORKERS CAMPAIGN...
#
# Each CAMPAIGN is NAME:CHUNKS:DRAWS:SEED0:FUZZ-FLAGS (flags joined with '+'), e.g.
#   sm_90a:5:1000:30000:--arch+sm_90a   llm:8:250:40000:--designs+grouped,block-scale
# Chunk i of a campaign runs `bench/fuzz.py FLAGS --draws DRAWS --seed SEED0+i*DRAWS --workers WORKERS`
# and writes OUT_DIR/fuzz-NAME-<seed>.txt (fuzz.py's report, its command line first). Campaigns
# run in the order given; a chunk is started only while DEADLINE_S seconds have not passed, and
# one still running at the deadline is stopped (its file says so), so every finished chunk's
# report is whole. Prints one line per chunk. Exit status 1 if any chunk found a wrong result or
# an error, else 0.
set -u
[ $# -ge 4 ] || { sed -n '2,14p' "$0" | sed 's/^# \{0,1\}//'; exit 2; }
OUT="$1"; DEADLINE="$2"; WORKERS="$3"; shift 3
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
export PYTHONPATH="$ROOT${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
mkdir -p "$OUT" || exit 2
START=$(date +%s)
BAD=0
for campaign in "$@"; do
  IFS=: read -r name chunks draws seed0 flags <<< "$campaign"
  for ((i = 0; i < chunks; i++)); do
    left=$(( DEADLINE - ($(date +%s) - START) ))
    if [ "$left" -lt 20 ]; then echo "$name: deadline reached, chunk $i of $chunks not started"; break 2; fi
    seed=$(( seed0 + i * draws ))
    file="$OUT/fuzz-$name-$seed.txt"
    echo "# PYTHONPATH=. python bench/fuzz.py ${flags//+/ } --draws $draws --seed $seed --workers $WORKERS" > "$file"
    timeout -k 10 "$left" "${PYTHON:-python3}" "$ROOT/bench/fuzz.py" ${flags//+/ } --draws "$draws" --seed "$seed" \
      --workers "$WORKERS" >> "$file" 2>&1
    rc=$?
    [ $rc -eq 124 ] || [ $rc -eq 137 ] && echo "# stopped at the deadline: incomplete" >> "$file"
    summary="$(grep -E '^(wrong|error) ' "$file" | tr -s ' ' | tr '\n' ' ')"
    echo "$name seed $seed: exit $rc; ${summary:-no summary}"
    grep -qE '^(wrong|error) +[1-9]' "$file" && BAD=1
    [ $rc -eq 124 ] || [ $rc -eq 137 ] && break 2
  done
done
exit $BAD
