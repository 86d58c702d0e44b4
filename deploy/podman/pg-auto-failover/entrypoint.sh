#!/bin/sh
# A pg_auto_failover monitor (`monitor`) or data node (`node`), as the postgres user, made on
# its first start and run again from its volume on every later one (`pg_autoctl create ...
# --run` carries on from an existing configuration).
#
# monitor: its failover settings from the environment (PGAF_HEALTH_CHECK_PERIOD and the rest
#   below), applied on every start.
# node: PG_AUTOCTL_MONITOR is the monitor's URL, NODE_NAME its name; once it is a primary or a
#   standby, Bergen's roles (roles.sql, passwords from BERGEN_OWNER_PASSWORD_FILE and
#   BERGEN_APP_PASSWORD_FILE) are made on the primary if they are missing, the roles may
#   connect to the database bergen from the containers' network with their passwords, and a
#   primary makes the checkpoint a new standby's base backup waits for.
#
# pg_autoctl's own connections (the monitor's health checks, replication, rewinds) are trusted
# from the containers' network (samenet, TLS): only the formation's containers and the servers
# share it. The nodes' rules are written here (--skip-pg-hba), not by pg_autoctl, whose rules
# name the other nodes' addresses of the moment: a container started again gets a new one.
# Across machines use --auth scram-sha-256 with passwords (pg_auto_failover's security
# documentation).
set -eu
role="${1:?usage: pg-auto-failover-entrypoint monitor|node}"
host="$(hostname)"
# One pg_autoctl per container: a pid file left by an earlier run of the container is stale
# (and may name the pid the new one gets).
rm -rf "${XDG_RUNTIME_DIR:?}"
mkdir -p "$XDG_RUNTIME_DIR"

psql_local() { psql -X -q -v ON_ERROR_STOP=1 -h /var/run/postgresql "$@"; }
ready() { psql_local -d "$1" -Atc 'SELECT 1' >/dev/null 2>&1; }

case "$role" in
monitor)
    pg_autoctl create monitor --pgdata "$PGDATA" --hostname "$host" --auth trust \
        --ssl-self-signed --run &
    db=pg_auto_failover
    ;;
node)
    pg_autoctl create postgres --pgdata "$PGDATA" --hostname "$host" \
        --name "${NODE_NAME:-$host}" --dbname bergen --skip-pg-hba --ssl-self-signed \
        --monitor "${PG_AUTOCTL_MONITOR:?the monitor's URL}" --run &
    db=bergen
    ;;
*)
    echo "pg-auto-failover-entrypoint: monitor or node, not $role" >&2
    exit 2
    ;;
esac
child=$!
trap 'kill -TERM "$child" 2>/dev/null' TERM INT

# A node is settled once it is a primary or a standby (its own state, --local): pg_autoctl
# must not be asked to reload its settings while it is still making the node.
settled() {
    [ "$role" = monitor ] && return 0
    pg_autoctl show state --pgdata "$PGDATA" --local 2>/dev/null \
        | grep -Eq '(single|primary|secondary) *$'
}
until ready "$db" && settled; do
    kill -0 "$child" 2>/dev/null || { wait "$child"; exit $?; }
    sleep 1
done

if [ "$role" = monitor ]; then
    # 6-7.5 s rather than the defaults' 50 s from the loss of a primary to its standby
    # taking writes (docs/operations.md says why each).
    psql_local -d pg_auto_failover <<SQL
ALTER SYSTEM SET pgautofailover.health_check_period = ${PGAF_HEALTH_CHECK_PERIOD:-1000};
ALTER SYSTEM SET pgautofailover.health_check_timeout = ${PGAF_HEALTH_CHECK_TIMEOUT:-1000};
ALTER SYSTEM SET pgautofailover.health_check_max_retries = ${PGAF_HEALTH_CHECK_MAX_RETRIES:-1};
ALTER SYSTEM SET pgautofailover.health_check_retry_delay = ${PGAF_HEALTH_CHECK_RETRY_DELAY:-500};
ALTER SYSTEM SET pgautofailover.node_considered_unhealthy_timeout = ${PGAF_UNHEALTHY_TIMEOUT:-3000};
ALTER SYSTEM SET pgautofailover.primary_demote_timeout = ${PGAF_PRIMARY_DEMOTE_TIMEOUT:-3000};
SELECT pg_reload_conf();
SQL
else
    hba="$PGDATA/pg_hba.conf"
    changed=no
    for rule in \
        "hostssl replication pgautofailover_replicator samenet trust" \
        "hostssl bergen pgautofailover_replicator samenet trust" \
        "hostssl all pgautofailover_monitor samenet trust" \
        "host bergen bergen_owner,bergen_app samenet scram-sha-256"; do
        grep -qxF "$rule" "$hba" || { echo "$rule" >> "$hba"; changed=yes; }
    done
    [ "$changed" = no ] || psql_local -d bergen -c 'SELECT pg_reload_conf()' >/dev/null
    # A primary cut off from the monitor and its standby demotes itself after this many
    # seconds (20 by default): before the monitor promotes the standby.
    pg_autoctl config set --pgdata "$PGDATA" timeout.network_partition_timeout \
        "${PGAF_NETWORK_PARTITION_TIMEOUT:-2}" >/dev/null || true
    primary="$(psql_local -d bergen -Atc 'SELECT NOT pg_is_in_recovery()')"
    exists="$(psql_local -d bergen -Atc "SELECT count(*) FROM pg_roles WHERE rolname = 'bergen_app'")"
    if [ "$primary" = t ] && [ "$exists" = 0 ]; then
        psql_local -d bergen -f /etc/bergen/roles.sql
        psql_local -d bergen \
            -v owner="$(cat "$BERGEN_OWNER_PASSWORD_FILE")" \
            -v app="$(cat "$BERGEN_APP_PASSWORD_FILE")" <<'SQL'
ALTER ROLE bergen_owner PASSWORD :'owner';
ALTER ROLE bergen_app PASSWORD :'app';
SQL
        echo "pg-auto-failover-entrypoint: Bergen's roles made"
    fi
    # A new standby's base backup (pg_autoctl's) waits for the primary's next checkpoint, up
    # to checkpoint_timeout (5 min) away: the primary makes it at once.
    (
        while kill -0 "$child" 2>/dev/null; do
            waiting="$(psql_local -d bergen -Atc "SELECT count(*) FROM pg_stat_progress_basebackup
                WHERE phase = 'waiting for checkpoint to finish'" 2>/dev/null || echo 0)"
            [ "$waiting" = 0 ] || psql_local -d bergen -c CHECKPOINT >/dev/null 2>&1 || true
            sleep 2
        done
    ) &
fi

wait "$child" || status=$?
# A signal interrupts the first wait: wait again for pg_autoctl to stop its PostgreSQL.
wait "$child" 2>/dev/null || true
exit "${status:-0}"
