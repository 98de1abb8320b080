#!/usr/bin/env bash
# Runs a 2-rank mtrun job as two "nodes": two network namespaces joined by a veth pair
# (10.231.0.1 and 10.231.0.2), one rank in each, rendezvous and collectives over TCP
# between them, as torchrun would start them on two hosts.
#
#   two-nodes.sh PORT MTRUN PLAN ARGS...      (rank 0's stdout goes to stdout)
#
# The namespaces are removed on exit, whatever happens.
set -euo pipefail
port=$1 mtrun=$2
shift 2
a=mtc-$$-a b=mtc-$$-b
cleanup() { ip netns del "$a" 2>/dev/null || true; ip netns del "$b" 2>/dev/null || true; }
trap cleanup EXIT
ip netns add "$a"
ip netns add "$b"
ip link add veth-a netns "$a" type veth peer name veth-b netns "$b"
ip -n "$a" addr add 10.231.0.1/24 dev veth-a
ip -n "$b" addr add 10.231.0.2/24 dev veth-b
for ns in "$a" "$b"; do
  ip -n "$ns" link set lo up
done
ip -n "$a" link set veth-a up
ip -n "$b" link set veth-b up

token=$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')
run() { # NS RANK ARGS...
  local ns=$1 rank=$2
  shift 2
  ip netns exec "$ns" env RANK="$rank" WORLD_SIZE=2 LOCAL_RANK=0 LOCAL_WORLD_SIZE=1 \
    MASTER_ADDR=10.231.0.1 MASTER_PORT="$port" MTC_JOB_TOKEN="$token" "$mtrun" "$@"
}
run "$a" 0 "$@" &
rank0=$!
run "$b" 1 "$@" > /dev/null &
rank1=$!
status=0
wait "$rank0" || status=$?
wait "$rank1" || status=$?
exit "$status"
