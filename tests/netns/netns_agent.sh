#!/bin/sh
# Open MPI's rsh launcher agent for tests/netns/run_netns_test.sh: `netns_agent.sh HOST COMMAND...` runs the
# launcher's daemon command inside the network namespace named HOST, in a UTS namespace of its own whose
# host name is HOST, as ssh would run it on a node of that name.
host=$1
shift
exec ip netns exec "$host" unshare --uts /bin/sh -c "hostname '$host' && $*"
