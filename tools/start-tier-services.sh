#!/usr/bin/env bash
#
# Start the machine's MariaDB and RabbitMQ for tox -e deployment, if needed.
#
# Usage: tools/start-tier-services.sh
#
# The deployment tier runs its services on the machine's MariaDB
# (127.0.0.1:3306, user root, no password) and RabbitMQ (127.0.0.1:5672,
# guest/guest). On a fresh Debian machine tools/install-bindep.sh has just
# installed them: this starts each one that does not answer (with its init
# script, as there may be no systemd) and gives root a login over TCP from
# 127.0.0.1 with no password, which Debian's MariaDB lacks (its root logs
# in through the unix socket only). What already answers is left alone.
set -euo pipefail

mariadb_answers() {
    mysql --protocol=tcp -h 127.0.0.1 -P 3306 -u root \
        -e 'SELECT 1' >/dev/null 2>&1
}

mariadb_socket_answers() {
    mysql -u root -e 'SELECT 1' >/dev/null 2>&1
}

rabbitmq_answers() {
    rabbitmqctl -q status >/dev/null 2>&1
}

wait_for() {
    local what=$1 check=$2
    for _ in $(seq 1 60); do
        if "$check"; then
            return 0
        fi
        sleep 1
    done
    echo "start-tier-services: $what does not answer after 60 s" >&2
    return 1
}

start() {
    local name=$1
    echo "start-tier-services: starting $name"
    if command -v service >/dev/null 2>&1; then
        service "$name" start
    else
        "/etc/init.d/$name" start
    fi
}

if ! mariadb_answers; then
    if [ "$(id -u)" -ne 0 ]; then
        echo "start-tier-services: MariaDB does not answer as root on" \
             "127.0.0.1:3306; run as root, or set it up first" >&2
        exit 1
    fi
    if ! mariadb_socket_answers; then
        start mariadb
        wait_for 'MariaDB (unix socket)' mariadb_socket_answers
    fi
    # root over TCP from 127.0.0.1 with no password: the tier's services
    # connect there (PyMySQL), never through the socket.
    echo "start-tier-services: granting root@127.0.0.1 (no password)"
    mysql -u root <<'EOF'
CREATE USER IF NOT EXISTS 'root'@'127.0.0.1' IDENTIFIED BY '';
GRANT ALL PRIVILEGES ON *.* TO 'root'@'127.0.0.1' WITH GRANT OPTION;
FLUSH PRIVILEGES;
EOF
    wait_for 'MariaDB on 127.0.0.1:3306' mariadb_answers
fi

if ! rabbitmq_answers; then
    if [ "$(id -u)" -ne 0 ]; then
        echo "start-tier-services: RabbitMQ is not running; run as root," \
             "or start it first" >&2
        exit 1
    fi
    start rabbitmq-server
    wait_for RabbitMQ rabbitmq_answers
fi
echo "start-tier-services: MariaDB and RabbitMQ answer"
