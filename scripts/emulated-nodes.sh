# Emulated nodes on one machine, for scripts/pe-run --nodes K (sourced, not run).
#
# Each node is a network namespace with its own hostname (a UTS namespace), joined to the
# others by a veth pair on a bridge in a private subnet (10.213.X.0/24, X the first not in use
# on this machine). Open MPI tells nodes apart by hostname: between nodes MPI goes over TCP and
# OSHMEM maps no peer (shmem_ptr is NULL). UCX, under OSHMEM, tells hosts apart by the boot id:
# each node gets one of its own (a mount namespace in which /proc/sys/kernel/random/boot_id is
# a file of the node's), so UCX too uses TCP between nodes, and its own /dev/shm (a tmpfs in
# its mount namespace, gone with its last process), as real nodes do: what a PE killed leaves
# there (Open MPI's shared-memory segments) is not found by a later run. With
# NODES_SHARED_BOOT_ID=1 the nodes keep the machine's boot id and /dev/shm, and UCX joins PEs
# on different nodes by shared memory while MPI still talks TCP. The Open MPI launcher reaches a node through an rsh agent that enters its
# namespaces and starts the daemon there; between nodes the PEs talk TCP over the bridge (the
# OpenSHMEM library sees different hosts: no shared-memory mapping), within a node shared
# memory as usual. With a rate (NODES_RATE, tc's units such as 1gbit) both ends of every link
# get a token-bucket filter (tbf), which this kernel has; it has no netem, so no added delay.
# NODES_QUEUE (tbf latency, default 100ms) bounds how long a packet waits in a link's queue
# before it is dropped: the depth of a switch port's buffer.
#
# Only the objects made here are touched, and nodes_down removes them all; pe-run calls it on
# every exit. Needs root (CAP_NET_ADMIN and CAP_SYS_ADMIN) and iproute2.

NODES_CREATED_NS=()
NODES_CREATED_LINKS=()
NODES_DIR=""

# nodes_fail MESSAGE: reports why nodes cannot be made and removes what was made.
nodes_fail() {
    echo "pe-run: cannot emulate nodes here: $1" >&2
    nodes_down
    return 1
}

# nodes_up K: makes K nodes. Sets NODES_HOSTS (host:slots list for -np pes), NODES_SUBNET and
# NODES_AGENT. Returns 1 (with a message) when this machine cannot.
nodes_up() {
    local k=$1 pes=$2
    for tool in ip unshare flock; do
        command -v "$tool" >/dev/null 2>&1 || { nodes_fail "'$tool' is missing (apt-get install iproute2 util-linux)"; return 1; }
    done
    local id=$$
    NODES_DIR=$(mktemp -d "${TMPDIR:-/tmp}/pe-run-nodes.XXXXXX")
    # One run at a time picks a subnet and makes its links.
    exec {lock}>"${TMPDIR:-/tmp}/onesided-emulated-nodes.lock"
    flock "$lock"
    local x used
    used=$(ip -o -4 addr show 2>/dev/null || true)
    for x in $(seq 1 254); do
        [[ $used == *" 10.213.$x."* ]] || break
    done
    NODES_SUBNET="10.213.$x.0/24"
    local bridge="osb$id" error
    if ! error=$(ip link add "$bridge" type bridge 2>&1); then
        flock -u "$lock"
        nodes_fail "making a bridge failed ($error); emulated nodes need root (CAP_NET_ADMIN)"
        return 1
    fi
    NODES_CREATED_LINKS+=("$bridge")
    ip addr add "10.213.$x.1/24" dev "$bridge" && ip link set "$bridge" up || {
        flock -u "$lock"; nodes_fail "configuring bridge $bridge failed"; return 1; }
    local i ns veth hosts=() slots=$(( (pes + k - 1) / k ))
    for (( i = 0; i < k; i++ )); do
        ns="onesided-$id-n$i"
        veth="osv${id}n$i"
        if ! error=$(ip netns add "$ns" 2>&1); then
            flock -u "$lock"; nodes_fail "making network namespace $ns failed ($error)"; return 1
        fi
        NODES_CREATED_NS+=("$ns")
        if ! error=$( { ip link add "$veth" type veth peer name eth0 netns "$ns" &&
            ip link set "$veth" master "$bridge" up &&
            ip -n "$ns" addr add "10.213.$x.$((10 + i))/24" dev eth0 &&
            ip -n "$ns" link set eth0 up && ip -n "$ns" link set lo up &&
            ip -n "$ns" route add default via "10.213.$x.1"; } 2>&1); then
            flock -u "$lock"; nodes_fail "linking node $i failed ($error)"; return 1
        fi
        NODES_CREATED_LINKS+=("$veth")
        if [[ -n ${NODES_RATE:-} ]]; then
            local queue=${NODES_QUEUE:-100ms}
            if ! error=$( { tc qdisc add dev "$veth" root tbf rate "$NODES_RATE" burst 256kbit latency "$queue" &&
                ip netns exec "$ns" tc qdisc add dev eth0 root tbf rate "$NODES_RATE" burst 256kbit latency "$queue"; } 2>&1); then
                flock -u "$lock"; nodes_fail "limiting node $i's link to $NODES_RATE failed ($error)"; return 1
            fi
        fi
        hosts+=("10.213.$x.$((10 + i)):$slots")
        if [[ ${NODES_SHARED_BOOT_ID:-0} == 1 ]]; then
            cp /proc/sys/kernel/random/boot_id "$NODES_DIR/boot_id.node$i"
        else
            cat /proc/sys/kernel/random/uuid >"$NODES_DIR/boot_id.node$i"
        fi
    done
    flock -u "$lock"
    NODES_HOSTS=$(IFS=,; echo "${hosts[*]}")
    # The rsh agent: `agent HOST command...` runs the command in HOST's namespaces, as ssh
    # would run it on a remote host (the words joined and given to a shell).
    NODES_AGENT="$NODES_DIR/agent"
    {
        echo '#!/bin/sh'
        echo 'host=$1; shift'
        echo 'case "$host" in'
        for (( i = 0; i < k; i++ )); do
            echo "    10.213.$x.$((10 + i))) ns=onesided-$id-n$i; name=node$i ;;"
        done
        echo '    *) echo "pe-run agent: $host is not an emulated node of this run" >&2; exit 1 ;;'
        echo 'esac'
        echo "dir=$NODES_DIR"
        local shm='mount -t tmpfs -o mode=1777 shm-$name /dev/shm && '
        if [[ ${NODES_SHARED_BOOT_ID:-0} == 1 ]]; then shm=; fi
        echo 'exec ip netns exec "$ns" unshare --uts --mount /bin/sh -c "hostname $name && mount --bind $dir/boot_id.$name /proc/sys/kernel/random/boot_id && '"$shm"'$*"'
    } >"$NODES_AGENT"
    chmod +x "$NODES_AGENT"
}

# nodes_down: removes every namespace and link nodes_up made, and its files.
nodes_down() {
    local ns link
    for ns in "${NODES_CREATED_NS[@]}"; do
        # Processes left in a namespace (a killed job's daemons) keep it alive: end them first.
        ip netns pids "$ns" 2>/dev/null | xargs -r kill -9 2>/dev/null || true
        ip netns del "$ns" 2>/dev/null || true
    done
    for link in "${NODES_CREATED_LINKS[@]}"; do
        ip link del "$link" 2>/dev/null || true
    done
    NODES_CREATED_NS=()
    NODES_CREATED_LINKS=()
    [[ -n $NODES_DIR ]] && rm -rf "$NODES_DIR"
    NODES_DIR=""
}
