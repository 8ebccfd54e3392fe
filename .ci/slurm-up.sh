#!/usr/bin/env bash
# Start a single-node SLURM cluster on this machine, for tests/app/test_slurm.py and for trying
# `hydra/launcher=slurm` locally:  sudo .ci/slurm-up.sh
#
# Debian/Ubuntu, as root. Installs Debian's slurmctld, slurmd, slurm-client and munge when
# absent; writes /etc/slurm/slurm.conf for this node (its real CPUs and memory, read from
# `slurmd -C`; no cgroups: proctrack/linuxproc, task/none; select/cons_tres), starts munged,
# slurmctld and slurmd without systemd (containers have none), and waits until `sinfo` shows
# the node idle. Idempotent: a second run checks each daemon and starts only what is missing.
# A slurm.conf this script did not write is never overwritten (exit 2). Any failure exits
# non-zero with the daemons' log tails.
set -euo pipefail

MARKER="# Written by retrieval-bench .ci/slurm-up.sh"
CONF=/etc/slurm/slurm.conf
LOG_DIR=/var/log/slurm
STATE_DIR=/var/lib/slurm
WAIT_S=${SLURM_UP_WAIT_S:-60}

say() { echo "slurm-up: $*"; }
die() {
    echo "slurm-up: ERROR: $*" >&2
    for log in "$LOG_DIR/slurmctld.log" "$LOG_DIR/slurmd.log" /var/log/munge/munged.log; do
        if [[ -s $log ]]; then
            echo "--- last lines of $log" >&2
            tail -n 15 "$log" >&2
        fi
    done
    exit 1
}

if [[ $(id -u) -ne 0 ]]; then
    echo "slurm-up: must run as root (sudo $0)" >&2
    exit 2
fi

# 1. Packages.
if ! command -v slurmctld >/dev/null || ! command -v slurmd >/dev/null \
    || ! command -v sinfo >/dev/null || ! command -v munged >/dev/null; then
    command -v apt-get >/dev/null || die "slurmctld/slurmd/munge are missing and there is no apt-get"
    say "installing slurmctld slurmd slurm-client munge"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -q
    apt-get install -y -q --no-install-recommends slurmctld slurmd slurm-client munge
fi

# 2. munge: one key, then the daemon (as the munge user, as its service unit does).
if [[ ! -s /etc/munge/munge.key ]]; then
    say "creating /etc/munge/munge.key"
    mungekey --create --keyfile=/etc/munge/munge.key
fi
chown munge:munge /etc/munge/munge.key
chmod 0400 /etc/munge/munge.key
install -d -o munge -g munge -m 0755 /run/munge
install -d -o munge -g munge -m 0700 /var/log/munge /var/lib/munge
if munge -n 2>/dev/null | unmunge >/dev/null 2>&1; then
    say "munged already running"
else
    say "starting munged"
    runuser -u munge -- /usr/sbin/munged
    munge -n | unmunge >/dev/null || die "munged does not answer"
fi

# 3. slurm.conf for this node.
node=$(hostname -s)
# e.g. "NodeName=vm CPUs=2 Boards=1 SocketsPerBoard=1 CoresPerSocket=2 ThreadsPerCore=1
# RealMemory=24105": the node line as slurmd sees the hardware.
hardware=$(slurmd -C | head -n 1 | sed -e "s/^NodeName=[^ ]*/NodeName=$node/")
[[ $hardware == NodeName=*CPUs=*RealMemory=* ]] || die "unexpected 'slurmd -C' output: $hardware"
wanted=$(
    cat <<EOF
$MARKER: a single-node cluster on this machine.
ClusterName=localcluster
SlurmctldHost=$node(127.0.0.1)
AuthType=auth/munge
SlurmUser=slurm
SlurmdUser=root
# No cgroups: works in containers and on machines without cgroup v2 delegation.
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
MpiDefault=none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
DefMemPerCPU=1024
ReturnToService=2
StateSaveLocation=$STATE_DIR/slurmctld
SlurmdSpoolDir=$STATE_DIR/slurmd
SlurmctldPidFile=/run/slurmctld.pid
SlurmdPidFile=/run/slurmd.pid
SlurmctldLogFile=$LOG_DIR/slurmctld.log
SlurmdLogFile=$LOG_DIR/slurmd.log
$hardware NodeAddr=127.0.0.1 State=UNKNOWN
PartitionName=debug Nodes=$node Default=YES MaxTime=INFINITE State=UP
EOF
)
changed=0
if [[ -e $CONF ]] && ! grep -qxF -- "$MARKER: a single-node cluster on this machine." "$CONF"; then
    echo "slurm-up: $CONF exists and was not written by this script; not touching it" >&2
    exit 2
fi
if [[ ! -e $CONF ]] || [[ "$(cat "$CONF")" != "$wanted" ]]; then
    say "writing $CONF ($hardware)"
    install -d -m 0755 /etc/slurm
    printf '%s\n' "$wanted" >"$CONF.tmp"
    mv "$CONF.tmp" "$CONF"
    changed=1
fi
install -d -o slurm -g slurm -m 0755 "$STATE_DIR/slurmctld" "$STATE_DIR/slurmd" "$LOG_DIR"

# 4. The daemons: restarted when the config changed, started when not running.
# Whether the daemon $1 runs: its pid file names a live process that is that daemon (a pid file
# left by a daemon that died can name a pid the kernel has since given to another process or
# thread, e.g. one of a restarted slurmctld's).
running() {
    local pid
    pid=$(cat "/run/$1.pid" 2>/dev/null) || return 1
    [[ $pid =~ ^[0-9]+$ ]] && [[ $(cat "/proc/$pid/comm" 2>/dev/null) == "$1" ]]
}
stop() { # $1: daemon name; its pid file is /run/$1.pid
    local pidfile=/run/$1.pid
    if running "$1"; then
        say "stopping $1 (config changed)"
        kill "$(cat "$pidfile")"
        for _ in $(seq 50); do
            kill -0 "$(cat "$pidfile")" 2>/dev/null || return 0
            sleep 0.2
        done
        die "$1 (pid $(cat "$pidfile")) did not stop"
    fi
}
if [[ $changed -eq 1 ]]; then
    stop slurmd
    stop slurmctld
fi
if running slurmctld; then
    say "slurmctld already running"
else
    say "starting slurmctld"
    slurmctld || die "slurmctld did not start"
fi
for _ in $(seq "$WAIT_S"); do
    scontrol ping 2>/dev/null | grep -q "is UP" && break
    sleep 1
done
scontrol ping | grep -q "is UP" || die "slurmctld does not answer 'scontrol ping'"
if running slurmd; then
    say "slurmd already running"
else
    say "starting slurmd"
    slurmd || die "slurmd did not start"
fi

# 5. Wait until the node takes jobs.
state=""
for _ in $(seq "$WAIT_S"); do
    state=$(sinfo -h -n "$node" -o "%t" 2>/dev/null | head -n 1)
    case $state in
        idle | mix | alloc) break ;;
        down* | drain* | drng*)
            # A node left down by an earlier run (e.g. slurmd was killed): take it back.
            scontrol update NodeName="$node" State=RESUME 2>/dev/null || true ;;
    esac
    sleep 1
done
case $state in
    idle | mix | alloc) ;;
    *) die "node $node is '$state' after ${WAIT_S}s, not idle" ;;
esac
say "node $node is $state:"
sinfo -N -o "%N %t %c %m %P"
