#!/usr/bin/env bash
# Trains PLAN_DIR on 4 ranks under mpirun, stops one rank with SIGSTOP once
# the steps are under way, and reports how the job ended: its exit status
# and the seconds from the SIGSTOP to mpirun's exit.
#   stop-rank.sh PLAN_DIR TIMEOUT_S OUT_PREFIX
set -u
plan=$1 timeout_s=$2 out=$3
mpirun --oversubscribe -np 4 autopar-run "$plan" --steps 1000000 \
  --random-init --comm-timeout "$timeout_s" >"$out.log" 2>"$out.err" &
job=$!
# Wait until the job prints its first step (every rank is past start-up).
for _ in $(seq 1 600); do
  grep -q '^step 1 ' "$out.log" 2>/dev/null && break
  sleep 0.1
done
# The ranks are processes whose command line names the plan; stop the one
# started third (not rank 0, which prints).
victim=$(pgrep -f -- "autopar-run $plan --steps 1000000" | sort -n | sed -n 3p)
if [[ -z $victim ]]; then
  echo "no rank to stop"
  kill -KILL $job 2>/dev/null
  exit 1
fi
start=$(date +%s%N)
kill -STOP "$victim"
wait $job
rc=$?
end=$(date +%s%N)
kill -KILL "$victim" 2>/dev/null
kill -CONT "$victim" 2>/dev/null
echo "rc $rc seconds $(( (end - start) / 1000000000 ))"
# No rank is left behind.
sleep 0.5
if pgrep -f -- "autopar-run $plan --steps 1000000" >/dev/null; then
  echo "ranks left running"
  pkill -KILL -f -- "autopar-run $plan --steps 1000000"
fi
