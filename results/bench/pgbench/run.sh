#!/usr/bin/env bash
# One alternating run of pgbench (16 clients, durable PostgreSQL, T seconds
# a variant, default 15; ROUNDS rounds, default 3): every variant per round, each on emptied tables
# after a checkpoint, the variants setup.sh wrote (or those named as
# arguments: run.sh bare leased leased_shape). Prints
# transactions/s, the machine's CPU per transaction and WAL per transaction.
set -euo pipefail
cd "$(dirname "$0")"
P="psql -h 127.0.0.1 -U postgres -d lever -qAtX"
variants=("$@")
if [ ${#variants[@]} = 0 ]; then
  variants=(bare txonly deferred deferred_k2 deferred_k3 nolockwait plain
            claimfirst_shape claimfirst claimfirst_k3 claimfirst_k4 claimfirst_nolockwait claimfirst_nofence
            leased_shape leased leased_k3 leased_k4 leased_nolockwait leased_nofence leased_async)
fi
busy() { awk '/^cpu /{print $2+$3+$4+$7+$8}' /proc/stat; }   # user nice system irq softirq, in ticks
for round in $(seq 1 ${ROUNDS:-3}); do
  for v in "${variants[@]}"; do
    $P -c "TRUNCATE t, idempotency_keys, k2, k3, k4" -c "CHECKPOINT" >/dev/null
    lsn0=$($P -c "SELECT pg_current_wal_lsn()"); c0=$(busy)
    out=$(pgbench -h 127.0.0.1 -U postgres -n -M prepared -c 16 -j 2 -T ${T:-15} -f $v.sql lever 2>&1)
    c1=$(busy); lsn1=$($P -c "SELECT pg_current_wal_lsn()")
    n=$(echo "$out" | awk '/number of transactions actually processed/{print $6}')
    tps=$(echo "$out" | awk '/^tps/{print $3}')
    wal=$($P -c "SELECT pg_wal_lsn_diff('$lsn1','$lsn0')")
    echo "$round $v tps=$tps n=$n cpu_ms_per_txn=$(echo "scale=3; ($c1-$c0)*10/$n" | bc) wal_B_per_txn=$(echo "$wal/$n" | bc) load=$(cut -d' ' -f1 /proc/loadavg)"
  done
done
