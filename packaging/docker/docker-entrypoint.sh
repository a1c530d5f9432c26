#!/bin/sh
# The zkd image's entrypoint. It follows the environment conventions of the official ZooKeeper
# image, so a compose file or Helm values written for that image start zkd unchanged:
#   ZOO_CONF_DIR (/conf), ZOO_DATA_DIR (/data), ZOO_DATA_LOG_DIR (/datalog)
#   ZOO_MY_ID (1): written to $ZOO_DATA_DIR/myid unless that file exists
#   ZOO_SERVERS: space-separated server.N=host:peerPort:electionPort;clientPort entries
#                (default: one server, server.1=localhost:2888:3888;2181)
#   ZOO_TICK_TIME (2000), ZOO_INIT_LIMIT (5), ZOO_SYNC_LIMIT (2), ZOO_MAX_CLIENT_CNXNS (60),
#   ZOO_STANDALONE_ENABLED (true), ZOO_ADMINSERVER_ENABLED (true),
#   ZOO_AUTOPURGE_PURGEINTERVAL (0), ZOO_AUTOPURGE_SNAPRETAINCOUNT (3),
#   ZOO_4LW_COMMANDS_WHITELIST, ZOO_CFG_EXTRA (space-separated key=value lines)
# As there, zoo.cfg is generated only when $ZOO_CONF_DIR/zoo.cfg does not exist: a mounted one
# wins. Then the command runs (by default: zkd -config $ZOO_CONF_DIR/zoo.cfg).
set -eu

: "${ZOO_CONF_DIR:=/conf}" "${ZOO_DATA_DIR:=/data}" "${ZOO_DATA_LOG_DIR:=/datalog}"
: "${ZOO_TICK_TIME:=2000}" "${ZOO_INIT_LIMIT:=5}" "${ZOO_SYNC_LIMIT:=2}"
: "${ZOO_MAX_CLIENT_CNXNS:=60}" "${ZOO_STANDALONE_ENABLED:=true}" "${ZOO_ADMINSERVER_ENABLED:=true}"
: "${ZOO_AUTOPURGE_PURGEINTERVAL:=0}" "${ZOO_AUTOPURGE_SNAPRETAINCOUNT:=3}"
: "${ZOO_SERVERS:=server.1=localhost:2888:3888;2181}"
export ZOO_CONF_DIR

mkdir -p "$ZOO_CONF_DIR" "$ZOO_DATA_DIR" "$ZOO_DATA_LOG_DIR"
cfg="$ZOO_CONF_DIR/zoo.cfg"
if [ ! -f "$cfg" ]; then
	{
		echo "dataDir=$ZOO_DATA_DIR"
		echo "dataLogDir=$ZOO_DATA_LOG_DIR"
		echo "tickTime=$ZOO_TICK_TIME"
		echo "initLimit=$ZOO_INIT_LIMIT"
		echo "syncLimit=$ZOO_SYNC_LIMIT"
		echo "autopurge.snapRetainCount=$ZOO_AUTOPURGE_SNAPRETAINCOUNT"
		echo "autopurge.purgeInterval=$ZOO_AUTOPURGE_PURGEINTERVAL"
		echo "maxClientCnxns=$ZOO_MAX_CLIENT_CNXNS"
		echo "standaloneEnabled=$ZOO_STANDALONE_ENABLED"
		echo "admin.enableServer=$ZOO_ADMINSERVER_ENABLED"
		for server in $ZOO_SERVERS; do
			echo "$server"
		done
		if [ -n "${ZOO_4LW_COMMANDS_WHITELIST:-}" ]; then
			echo "4lw.commands.whitelist=$ZOO_4LW_COMMANDS_WHITELIST"
		fi
		for line in ${ZOO_CFG_EXTRA:-}; do
			echo "$line"
		done
	} >"$cfg.tmp"
	mv "$cfg.tmp" "$cfg"
fi
if [ ! -f "$ZOO_DATA_DIR/myid" ]; then
	echo "${ZOO_MY_ID:-1}" >"$ZOO_DATA_DIR/myid"
fi
if [ "$#" -eq 0 ]; then
	set -- zkd -config "$cfg"
fi
exec "$@"
