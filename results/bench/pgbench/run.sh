#!/usr/bin/env bash
# One alternating run of pgbench (16 clients, durable PostgreSQL, T seconds
# a variant, default 15; ROUNDS rounds, default 3): every variant per round, each on emptied tables
# after a checkpoint, the variants setup.sh wrote (or those named as
# arguments: run.sh bare leased leased_shape). Prints
# transactions/s, the machine's CPU per transaction, WAL per transaction,
# and WAL records and full-page images per transaction (pg_stat_wal: on a
# cluster of its own, PGPORT, these are the run's alone).
set -euo pipefail
cd "$(dirname "$0")"
P="psql -h 127.0.0.1 -U postgres -d lever -qAtX"
variants=("$@")
if [ ${#variants[@]} = 0 ]; then
  variants=(bare txonly deferred_before deferred deferred_k3 deferred_nokey deferred_brin deferred_split nolockwait plain
            claimfirst_shape claimfirst_before claimfirst claimfirst_k3 claimfirst_nokey claimfirst_nolockwait claimfirst_nofence
            leased_shape leased_before leased leased_k3 leased_nokey leased_hash leased_brin leased_split leased_nolockwait leased_nofence)
fi
busy() { awk '/^cpu /{print $2+$3+$4+$7+$8}' /proc/stat; }   # user nice system irq softirq, in ticks
for round in $(seq 1 ${ROUNDS:-3}); do
  for v in "${variants[@]}"; do
    $P -c "TRUNCATE t, idempotency_keys, kb, k3, k4, kn, kh, kx, ks, idemlease_records" -c "CHECKPOINT" >/dev/null
    lsn0=$($P -c "SELECT pg_current_wal_lsn()"); c0=$(busy)
    w0=$($P -c "SELECT wal_records || ' ' || wal_fpi FROM pg_stat_wal")
    out=$(pgbench -h 127.0.0.1 -U postgres -n -M prepared -c 16 -j 2 -T ${T:-15} -f $v.sql lever 2>&1)
    c1=$(busy); lsn1=$($P -c "SELECT pg_current_wal_lsn()")
    w1=$($P -c "SELECT wal_records || ' ' || wal_fpi FROM pg_stat_wal")
    n=$(echo "$out" | awk '/number of transactions actually processed/{print $6}')
    tps=$(echo "$out" | awk '/^tps/{print $3}')
    wal=$($P -c "SELECT pg_wal_lsn_diff('$lsn1','$lsn0')")
    echo "$round $v tps=$tps n=$n cpu_ms_per_txn=$(echo "scale=3; ($c1-$c0)*10/$n" | bc) wal_B_per_txn=$(echo "$wal/$n" | bc) wal_rec_per_txn=$(echo "scale=2; (${w1% *}-${w0% *})/$n" | bc) fpi_per_txn=$(echo "scale=3; (${w1#* }-${w0#* })/$n" | bc) load=$(cut -d' ' -f1 /proc/loadavg)"
  done
done
