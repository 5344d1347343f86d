#!/usr/bin/env bash
#
# tune-nic.sh: give the percore loop on CPU i its packets on CPU i.
#
# percore runs one event loop per CPU. This script does the host half of that: it sizes the NIC's
# queues to the loops, pins queue i's interrupt to the CPU of loop i, keeps irqbalance from moving
# those interrupts back, turns on (accelerated) receive flow steering and maps transmit queue i to
# CPU i. Where the hardware cannot (one queue, no IRQs, ntuple fixed off) it configures software
# RPS/RFS instead and prints one "gap:" line per reason. docs/operations.md has the deploy order.
#
# What apply changes, in this order (each only when it differs, so a second run changes nothing):
#   1. the queue count:        ethtool -L DEV combined N (else rx N tx N); then the per-queue IRQs
#                              are looked up, as a resize renumbers them
#   2. irqbalance:             --banirq=IRQ added to IRQBALANCE_ARGS in /etc/default/irqbalance or
#                              /etc/sysconfig/irqbalance and a restart (or, on request, a stop)
#   3. per-queue IRQ affinity: /proc/irq/IRQ/smp_affinity, queue i to the i-th CPU of --cpus
#   4. ntuple filters:         ethtool -K DEV ntuple on (accelerated RFS), where settable
#   5. RFS flow tables:        /proc/sys/net/core/rps_sock_flow_entries (raised, never lowered) and
#                              /sys/class/net/DEV/queues/rx-Q/rps_flow_cnt
#   6. RPS:                    /sys/class/net/DEV/queues/rx-Q/rps_cpus (loop CPUs in software mode,
#                              0 when every loop has its own hardware queue and IRQ)
#   7. XPS:                    /sys/class/net/DEV/queues/tx-Q/xps_cpus
#
# How to undo it: sudo tune-nic.sh --restore --dev DEV. Apply saves each original value the first
# time it changes it, in /run/percore-tune-nic/DEV.state; restore puts them back newest first and
# removes the file. All of the above except the irqbalance config file reverts at reboot by itself,
# and /run is emptied then too: restore before rebooting, or remove the added --banirq=N words from
# IRQBALANCE_ARGS by hand. IRQs that a resize frees come back with the kernel's default affinity.
# One apply or restore runs at a time: each holds flock(1) on the state directory, and a second
# exits 4 at once, having changed nothing.
#
# Test hooks (for scripts/tunenic_test.go; not a user interface, they may change at any time):
#   TUNE_NIC_SYS, TUNE_NIC_PROC, TUNE_NIC_ETC  roots read and written instead of /sys, /proc, /etc
#   TUNE_NIC_STATE_DIR                         state directory instead of /run/percore-tune-nic
#   TUNE_NIC_ETHTOOL, TUNE_NIC_SYSTEMCTL       commands run instead of ethtool and systemctl
# With TUNE_NIC_SYS or TUNE_NIC_PROC set, apply and restore do not insist on root.

set -euo pipefail
shopt -s extglob nullglob

readonly PROG=tune-nic.sh
readonly SYS=${TUNE_NIC_SYS:-/sys}
readonly PROC=${TUNE_NIC_PROC:-/proc}
readonly ETC=${TUNE_NIC_ETC:-/etc}
readonly STATE_DIR=${TUNE_NIC_STATE_DIR:-/run/percore-tune-nic}
readonly ETHTOOL=${TUNE_NIC_ETHTOOL:-ethtool}
readonly SYSTEMCTL=${TUNE_NIC_SYSTEMCTL:-systemctl}
readonly DEFAULT_FLOW_ENTRIES=32768
readonly MAX_FLOW_ENTRIES=536870912 # 1 << 29, the kernel's limit for rps_sock_flow_entries
readonly MAX_CPU=8191               # CONFIG_NR_CPUS is at most 8192

usage() {
	cat <<EOF
Usage:
  $PROG --check [--dev DEV] [--cpus LIST] [--json]
  sudo $PROG --cpus LIST [--dev DEV] [--dry-run] [--irqbalance ban|stop|ignore]
              [--flow-entries N] [--no-xps]
  sudo $PROG --restore [--dev DEV] [--dry-run]

Tune DEV so that the percore loop on CPU i gets its packets on CPU i: size its queues to the loops,
pin queue i's IRQ to the i-th CPU of LIST, keep irqbalance off those IRQs, turn on (accelerated)
receive flow steering and map transmit queue i to that CPU. What the hardware cannot do (one queue,
no IRQs, ntuple fixed off) is done in software (RPS/RFS) and reported on a "gap:" line.

Modes:
  --check          report the driver, queues, per-queue IRQs and their affinity, ntuple,
                   irqbalance, flow tables, RPS and XPS, then whether the full hardware recipe
                   applies; changes nothing and needs no root. It accepts the apply options and
                   predicts that run.
  (no mode)        apply the recipe for the loops on --cpus. Each step is skipped when already
                   right, so a second run changes nothing.
  --restore        put back every value an earlier apply changed, newest first, and remove the
                   state file

Options:
  --cpus LIST          the loops' CPUs in loop order, kernel list format (0-3,8): loop i runs on
                       the i-th CPU. Required to apply; --check defaults to every online CPU.
                       Duplicates and offline CPUs are errors.
  --dev DEV            the interface. Default: the default route's device (refuses to guess
                       among several); for --restore, the one device with saved state. lo is
                       never tuned.
  --json               with --check: print the report as one JSON object
  --dry-run            print every command and write ("would write V > PATH (now X)") and change
                       nothing
  --irqbalance MODE    ban (default): add --banirq=IRQ to IRQBALANCE_ARGS and restart irqbalance;
                       stop: stop irqbalance; ignore: leave it running and report the gap
  --flow-entries N     the global RFS table size (rps_sock_flow_entries), rounded up to a power
                       of two; raised to it, never lowered. Each rx queue gets entries/queues.
                       Default $DEFAULT_FLOW_ENTRIES.
  --no-xps             leave transmit steering (xps_cpus) alone
  -h, --help           print this text

Exit status:
  0  done (apply, restore); --check: the full hardware recipe applies
  1  usage or validation error (unknown option, bad, duplicate or offline CPU, no such device,
     lo, several default routes, not root); nothing was changed
  2  --check: the full hardware recipe does not apply; each "gap:" line says why and what
     apply does instead. Apply still works and exits 0.
  3  a step failed after changes began; what changed before it is in the state file, so
     --restore still undoes it. --restore: some values could not be put back; the state file
     is kept, so --restore can be run again
  4  another apply or restore holds the lock on the state directory; nothing was changed

The originals are saved in $STATE_DIR/DEV.state.
EOF
}

# Options.
MODE=apply
DEV=
CPUS_ARG=
JSON=0
DRY=0
QUIET=0
IRQB_MODE=ban
FLOW_ENTRIES=$DEFAULT_FLOW_ENTRIES
NO_XPS=0
SAW_APPLY_OPT=0 # --irqbalance, --flow-entries or --no-xps given

# Derived from the options.
NETDIR=
STATE_FILE=
CPUS=()
N=0

# Facts about DEV, from gather.
DRIVER=unknown
CH_MODE=none # combined, rxtx or none (ethtool reports nothing settable)
CH_MAX_COMB=0 CH_MAX_RX=0 CH_MAX_TX=0 CH_COMB=0 CH_RX=0 CH_TX=0
Q_RX=0 Q_TX=0
NTUPLE=unsupported # on, off, fixed or unsupported
IRQB_RUNNING=0
IRQB_CONF=
IRQB_BANNED=()
GLOBAL_PATH=
GLOBAL_VISIBLE=0
GLOBAL_VAL=0
declare -A QIRQ=()     # queue -> "IRQ IRQ ..."
declare -A IRQ_NAME=() # IRQ -> its name in /proc/interrupts
MAX_IRQ_QUEUE=-1

# The plan's results.
RESIZE_PENDING=0 # a dry run would have resized: later steps describe queues that do not exist yet
T_RX=0 T_TX=0    # the queue counts after sizing
HAS_IRQS=0
SOFTWARE=0
PIN_IRQS=()
CHANGES=0
GAPS=()    # "reason<TAB>instead"
STATE_ADDED=0
STATE_LAST=
STATE_LOADED=0
LOCK_FD=
declare -A SAVED=() # "KIND KEY" of the records in the state file
WRITE_ERR=

die_usage() {
	printf '%s: %s\n' "$PROG" "$*" >&2
	printf "run '%s --help' for usage\n" "$PROG" >&2
	exit 1
}

die_step() {
	printf '%s: %s\n' "$PROG" "$*" >&2
	if [[ -s $STATE_FILE ]]; then
		printf '%s: the values changed so far are saved in %s; undo them with: %s --restore --dev %s\n' \
			"$PROG" "$STATE_FILE" "$PROG" "$DEV" >&2
	fi
	exit 3
}

say() {
	if ((!QUIET)); then printf '%s\n' "$*"; fi
}

add_gap() {
	GAPS+=("$1"$'\t'"$2")
}

# ---- CPU lists and masks -------------------------------------------------------------------

# parse_cpulist LIST: sets CPULIST to the CPUs of the kernel list LIST (0-3,8) in list order.
# Returns 1 with the reason in PARSE_ERR when LIST is malformed or names a CPU twice.
parse_cpulist() {
	local list=$1 item lo hi c
	local -A seen=()
	local -a items=()
	CPULIST=()
	PARSE_ERR=
	if [[ ! $list =~ ^[0-9]{1,5}(-[0-9]{1,5})?(,[0-9]{1,5}(-[0-9]{1,5})?)*$ ]]; then
		PARSE_ERR="bad CPU list '$list': want the kernel list format, like 0-3,8"
		return 1
	fi
	IFS=, read -ra items <<<"$list"
	for item in "${items[@]}"; do
		lo=$((10#${item%-*}))
		hi=$((10#${item#*-}))
		if ((lo > hi)); then
			PARSE_ERR="bad CPU range '$item' in '$list': the first CPU is higher than the last"
			return 1
		fi
		if ((hi > MAX_CPU)); then
			PARSE_ERR="CPU $hi in '$list' is beyond the kernel's limit of $((MAX_CPU + 1)) CPUs"
			return 1
		fi
		for ((c = lo; c <= hi; c++)); do
			if [[ -n ${seen[$c]:-} ]]; then
				PARSE_ERR="CPU $c appears twice in '$list'"
				return 1
			fi
			seen[$c]=1
			CPULIST+=("$c")
		done
	done
}

# cpu_mask CPU...: sets MASK to the mask of the CPUs in the format of smp_affinity, rps_cpus and
# xps_cpus: 32-bit hex words, most significant first, separated by commas, as many words as the
# highest CPU needs (CPU 0 is 00000001, CPU 32 is 00000001,00000000). The helpers set a variable
# rather than print, because $(...) forks and they run for every queue.
cpu_mask() {
	local c i max=0 word
	local -a words=()
	for c in "$@"; do
		if ((c > max)); then max=$c; fi
	done
	for ((i = 0; i <= max / 32; i++)); do words[i]=0; done
	for c in "$@"; do
		words[c / 32]=$((words[c / 32] | (1 << (c % 32))))
	done
	MASK=
	for ((i = max / 32; i >= 0; i--)); do
		printf -v word '%08x' "${words[i]}"
		MASK+=$word
		if ((i > 0)); then MASK+=,; fi
	done
}

# mask_norm MASK: sets NORM to MASK without commas and leading zeros, in lower case, so that
# masks printed at different widths compare equal.
mask_norm() {
	NORM=${1//,/}
	NORM=${NORM,,}
	NORM=${NORM##+(0)}
	NORM=${NORM:-0}
}

# pow2_ceil N: sets POW2 to the smallest power of two that is at least N.
pow2_ceil() {
	POW2=1
	while ((POW2 < $1)); do POW2=$((POW2 * 2)); done
}

# ---- reading and writing -------------------------------------------------------------------

# read_file PATH [DEFAULT]: sets FILE to PATH's content without the trailing newline; when PATH
# cannot be read, or is empty, sets FILE to DEFAULT and returns 1. A read error (like ENOENT from
# the xps_cpus of a lone TX queue, which ls lists) leaves FILE empty: read assigns nothing then,
# and $(<PATH) would hide the error. No value this script reads is empty when it can be read.
read_file() {
	FILE=
	{ IFS= read -r -d '' FILE <"$1"; } 2>/dev/null || true
	FILE=${FILE%$'\n'}
	if [[ -n $FILE ]]; then return 0; fi
	FILE=${2:-}
	return 1
}

# same_value KIND NOW WANT: whether NOW already is WANT, compared as a mask, an integer or text.
same_value() {
	case $1 in
	mask)
		local a
		mask_norm "$2"
		a=$NORM
		mask_norm "$3"
		[[ $a == "$NORM" ]]
		;;
	int) [[ $2 =~ ^[0-9]+$ ]] && (($((10#$2)) == $((10#$3)))) ;;
	*) [[ $2 == "$3" ]] ;;
	esac
}

# state_save KIND KEY VALUE: records VALUE as the original of KEY in the state file unless KEY
# already has one there (the first original is the one to restore). STATE_ADDED says whether it
# was recorded, for state_unsave. A dry run records nothing. take_lock has created the state
# directory by then: only apply, after take_lock, saves anything.
state_save() {
	local kind key
	STATE_ADDED=0
	if ((DRY)); then return 0; fi
	if ((!STATE_LOADED)); then
		if [[ -f $STATE_FILE ]]; then
			while IFS=$'\t' read -r kind key _; do SAVED["$kind $key"]=1; done <"$STATE_FILE"
		fi
		STATE_LOADED=1
	fi
	if [[ -n ${SAVED["$1 $2"]:-} ]]; then return 0; fi
	printf '%s\t%s\t%s\n' "$1" "$2" "$3" >>"$STATE_FILE" || die_step "write the state file $STATE_FILE"
	SAVED["$1 $2"]=1
	STATE_ADDED=1
	STATE_LAST="$1 $2"
}

# state_unsave: drops the record state_save just added, after the change it guarded failed.
state_unsave() {
	if ((STATE_ADDED)); then
		sed -i '$d' "$STATE_FILE"
		if [[ ! -s $STATE_FILE ]]; then rm -f "$STATE_FILE"; fi
		SAVED[$STATE_LAST]=
		STATE_ADDED=0
	fi
}

# set_value PATH WANT KIND: makes PATH hold WANT (compared as KIND, see same_value), saving the
# original the first time; does nothing when PATH already holds it. Returns 1 with the reason in
# WRITE_ERR when the write fails and 2 when PATH cannot be read.
set_value() {
	local path=$1 want=$2 kind=$3 now
	if read_file "$path"; then now=$FILE; else
		if ((DRY && RESIZE_PENDING)) && [[ ! -e $path ]]; then
			say "would write $want > $path (now: absent, the resize creates it)"
			CHANGES=$((CHANGES + 1))
			return 0
		fi
		WRITE_ERR="cannot read $path"
		return 2
	fi
	if same_value "$kind" "$now" "$want"; then return 0; fi
	CHANGES=$((CHANGES + 1))
	if ((DRY)); then
		say "would write $want > $path (now $now)"
		return 0
	fi
	state_save file "$path" "$now"
	if ! WRITE_ERR=$({ printf '%s\n' "$want" >"$path"; } 2>&1); then
		WRITE_ERR=${WRITE_ERR##*: }
		state_unsave
		CHANGES=$((CHANGES - 1))
		return 1
	fi
	say "write $want > $path (was $now)"
}

# run_change NOW CMD...: runs CMD, a change whose current state is NOW, or says it would.
# Returns CMD's status with its error output in WRITE_ERR.
run_change() {
	local now=$1
	shift
	CHANGES=$((CHANGES + 1))
	if ((DRY)); then
		say "would run: $* (now $now)"
		return 0
	fi
	say "run: $* (was $now)"
	WRITE_ERR=$("$@" 2>&1 >/dev/null) || return $?
}

# ---- the device ----------------------------------------------------------------------------

# default_route_dev: sets DEV to the one device the default routes (IPv4 and IPv6) go through.
default_route_dev() {
	local -a devs=()
	local -A seen=()
	local iface dest flags mask plen dev
	if [[ -r $PROC/net/route ]]; then
		while read -r iface dest _ flags _ _ _ mask _; do
			[[ $dest == 00000000 && $mask == 00000000 && $flags =~ ^[0-9A-Fa-f]+$ ]] || continue
			if (((16#$flags & 0x200) == 0)) && [[ $iface != lo && -z ${seen[$iface]:-} ]]; then
				seen[$iface]=1
				devs+=("$iface")
			fi
		done <"$PROC/net/route"
	fi
	if [[ -r $PROC/net/ipv6_route ]]; then
		while read -r dest plen _ _ _ _ _ _ flags dev; do
			[[ $dest =~ ^0{32}$ && $plen == 00 && $flags =~ ^[0-9A-Fa-f]+$ ]] || continue
			if (((16#$flags & 0x200) == 0)) && [[ $dev != lo && -z ${seen[$dev]:-} ]]; then
				seen[$dev]=1
				devs+=("$dev")
			fi
		done <"$PROC/net/ipv6_route"
	fi
	case ${#devs[@]} in
	0) die_usage "no default route to take the device from: pass --dev" ;;
	1) DEV=${devs[0]} ;;
	*) die_usage "the default routes go through several devices (${devs[*]}): pass --dev" ;;
	esac
}

check_dev_name() {
	if [[ -z $DEV || $DEV == *[/[:space:]]* || $DEV == . || $DEV == .. ]]; then
		die_usage "bad device name '$DEV'"
	fi
	if [[ $DEV == lo ]]; then die_usage "lo is never tuned"; fi
}

resolve_dev() {
	if [[ -z $DEV ]]; then default_route_dev; fi
	check_dev_name
	NETDIR=$SYS/class/net/$DEV
	if [[ ! -e $NETDIR ]]; then die_usage "no network device $DEV ($NETDIR does not exist)"; fi
	if read_file "$NETDIR/type" && [[ $FILE == 772 ]]; then die_usage "$DEV is a loopback device: never tuned"; fi
	STATE_FILE=$STATE_DIR/$DEV.state
}

resolve_cpus() {
	local online
	local -A is_online=()
	if ! read_file "$SYS/devices/system/cpu/online"; then
		die_usage "cannot read the online CPUs from $SYS/devices/system/cpu/online"
	fi
	online=$FILE
	parse_cpulist "$online" || die_usage "cannot parse the online CPUs '$online': $PARSE_ERR"
	local c
	for c in "${CPULIST[@]}"; do is_online[$c]=1; done
	if [[ -z $CPUS_ARG ]]; then
		CPUS=("${CPULIST[@]}")
	else
		parse_cpulist "$CPUS_ARG" || die_usage "$PARSE_ERR"
		for c in "${CPULIST[@]}"; do
			if [[ -z ${is_online[$c]:-} ]]; then die_usage "CPU $c is not online (online: $online)"; fi
		done
		CPUS=("${CPULIST[@]}")
	fi
	N=${#CPUS[@]}
}

# count_queues: sets Q_RX and Q_TX to the number of rx and tx queue directories in sysfs.
count_queues() {
	local -a rx=("$NETDIR"/queues/rx-+([0-9])) tx=("$NETDIR"/queues/tx-+([0-9]))
	Q_RX=${#rx[@]}
	Q_TX=${#tx[@]}
}

# read_channels: the channel counts from ethtool -l ("n/a" is 0) and how they can be set.
read_channels() {
	local out line key val section=
	CH_MODE=none CH_MAX_COMB=0 CH_MAX_RX=0 CH_MAX_TX=0 CH_COMB=0 CH_RX=0 CH_TX=0
	out=$("$ETHTOOL" -l "$DEV" 2>/dev/null) || return 0
	while IFS= read -r line; do
		case $line in
		Pre-set*) section=max ;;
		Current*) section=cur ;;
		*:*)
			key=${line%%:*}
			val=${line#*:}
			val=${val//[[:space:]]/}
			[[ $val =~ ^[0-9]+$ ]] || val=0
			case $section/$key in
			max/Combined) CH_MAX_COMB=$val ;;
			max/RX) CH_MAX_RX=$val ;;
			max/TX) CH_MAX_TX=$val ;;
			cur/Combined) CH_COMB=$val ;;
			cur/RX) CH_RX=$val ;;
			cur/TX) CH_TX=$val ;;
			esac
			;;
		esac
	done <<<"$out"
	if ((CH_MAX_COMB > 0)); then
		CH_MODE=combined
	elif ((CH_MAX_RX > 0 && CH_MAX_TX > 0)); then
		CH_MODE=rxtx
	fi
}

channels_now() {
	case $CH_MODE in
	combined) printf 'combined %d' "$CH_COMB" ;;
	rxtx) printf 'rx %d tx %d' "$CH_RX" "$CH_TX" ;;
	*) printf 'unknown' ;;
	esac
}

read_driver() {
	local out
	out=$("$ETHTOOL" -i "$DEV" 2>/dev/null) || out=
	DRIVER=$(awk -F': *' '$1 == "driver" { print $2; exit }' <<<"$out")
	if [[ -z $DRIVER && -e $NETDIR/device/driver ]]; then
		DRIVER=$(readlink -f "$NETDIR/device/driver" || true)
		DRIVER=${DRIVER##*/}
	fi
	DRIVER=${DRIVER:-unknown}
}

read_ntuple() {
	local out line
	out=$("$ETHTOOL" -k "$DEV" 2>/dev/null) || out=
	line=$(grep -m1 '^ntuple-filters:' <<<"$out" || true)
	case $line in
	*': on'*) NTUPLE=on ;;
	*'[fixed]'*) NTUPLE=fixed ;;
	*': off'*) NTUPLE=off ;;
	*) NTUPLE=unsupported ;;
	esac
}

# irqbalance_args: prints "LINE<TAB>VALUE" for the last IRQBALANCE_ARGS= line of the config, with
# one layer of quotes taken off VALUE, or nothing when there is none.
irqbalance_args() {
	local line
	line=$(awk '/^[[:space:]]*(export[[:space:]]+)?IRQBALANCE_ARGS=/ { n = NR; v = $0 } END { if (n) { sub(/^[^=]*=/, "", v); print n "\t" v } }' "$IRQB_CONF")
	[[ -n $line ]] || return 0
	local n=${line%%$'\t'*} v=${line#*$'\t'}
	if [[ $v == \"*\" || $v == \'*\' ]]; then
		v=${v:1:${#v}-2}
	fi
	printf '%s\t%s' "$n" "$v"
}

read_irqbalance() {
	local f args tok
	local -a toks=()
	IRQB_RUNNING=0 IRQB_CONF='' IRQB_BANNED=()
	if command -v "$SYSTEMCTL" >/dev/null 2>&1; then
		if "$SYSTEMCTL" is-active --quiet irqbalance >/dev/null 2>&1; then IRQB_RUNNING=1; fi
	else
		for f in "$PROC"/+([0-9])/comm; do
			if read_file "$f" && [[ $FILE == irqbalance ]]; then IRQB_RUNNING=1; fi
		done
	fi
	for f in "$ETC/default/irqbalance" "$ETC/sysconfig/irqbalance"; do
		if [[ -f $f ]]; then
			IRQB_CONF=$f
			break
		fi
	done
	[[ -n $IRQB_CONF ]] || return 0
	args=$(irqbalance_args)
	read -ra toks <<<"${args#*$'\t'}"
	for tok in "${toks[@]}"; do
		if [[ $tok =~ ^--banirq=([0-9]+)$ ]]; then IRQB_BANNED+=("${BASH_REMATCH[1]}"); fi
	done
}

# find_queue_irqs: fills QIRQ with the device's per-queue IRQs, named by driver in the last column
# of /proc/interrupts: Intel and others "DEV-TxRx-N" (also DEV-rx-N, DEV-tx-N; the misc and fdir
# vectors are skipped), mlx5 "mlx5_compN@pci:BUS" (mlx5_async skipped), virtio "virtioK-input.N"
# and "virtioK-output.N" (K is the virtio device, not the interface), gve "gve-ntfy-blkN@pci:BUS"
# (blocks 0..n/2-1 serve tx queues, n/2.. rx). Only the IRQs in the msi_irqs of the device or its
# parent (the PCI function of a virtio device) count, when there is such a list.
find_queue_irqs() {
	local real='' bus='' vdev='' d f irq name q half
	local -A allowed=()
	local restrict=0
	local -a gve=()
	QIRQ=() IRQ_NAME=() MAX_IRQ_QUEUE=-1
	if [[ -e $NETDIR/device ]]; then real=$(readlink -f "$NETDIR/device" || true); fi
	if [[ -n $real ]]; then
		vdev=${real##*/}
		for d in "$real" "${real%/*}"; do
			if [[ -d $d/msi_irqs ]]; then
				restrict=1
				bus=${d##*/}
				for f in "$d"/msi_irqs/*; do allowed[${f##*/}]=1; done
				break
			fi
		done
	fi
	[[ -r $PROC/interrupts ]] || return 0
	while read -r irq name; do
		if ((restrict)) && [[ -z ${allowed[$irq]:-} ]]; then continue; fi
		q=
		case $name in
		"$DEV"-TxRx-+([0-9]) | *-"$DEV"-TxRx-+([0-9]) | "$DEV"-[rt]x-+([0-9]) | *-"$DEV"-[rt]x-+([0-9]))
			q=${name##*-}
			;;
		mlx5_comp+([0-9])@pci:*)
			if [[ -n $bus && $name == *"@pci:$bus" ]]; then
				q=${name#mlx5_comp}
				q=${q%%@*}
			fi
			;;
		virtio+([0-9])-input.+([0-9]) | virtio+([0-9])-output.+([0-9]))
			if [[ $name == "$vdev"-* ]]; then q=${name##*.}; fi
			;;
		gve-ntfy-blk+([0-9])@pci:*)
			if [[ -n $bus && $name == *"@pci:$bus" ]]; then
				q=${name#gve-ntfy-blk}
				gve+=("$irq:${q%%@*}")
			fi
			q=
			;;
		esac
		if [[ -n $q ]]; then
			add_queue_irq "$((10#$q))" "$irq" "$name"
		fi
	done < <(awk '$1 ~ /^[0-9]+:$/ { sub(/:$/, "", $1); print $1, $NF }' "$PROC/interrupts")
	half=$((${#gve[@]} / 2))
	for d in "${gve[@]}"; do
		if ((half > 0)); then add_queue_irq "$((${d#*:} % half))" "${d%%:*}" "gve-ntfy-blk${d#*:}"; fi
	done
}

add_queue_irq() {
	QIRQ[$1]="${QIRQ[$1]:-}${QIRQ[$1]:+ }$2"
	IRQ_NAME[$2]=$3
	if (($1 > MAX_IRQ_QUEUE)); then MAX_IRQ_QUEUE=$1; fi
}

gather() {
	read_driver
	read_channels
	count_queues
	read_ntuple
	read_irqbalance
	GLOBAL_PATH=$PROC/sys/net/core/rps_sock_flow_entries
	GLOBAL_VISIBLE=0
	GLOBAL_VAL=0
	if read_file "$GLOBAL_PATH" && [[ $FILE =~ ^[0-9]+$ ]]; then
		GLOBAL_VISIBLE=1
		GLOBAL_VAL=$((10#$FILE))
	fi
	find_queue_irqs
}

# ---- the plan: apply, and (silently, as a dry run) check ------------------------------------

# save_doomed_queues RX TX: saves the RPS and XPS settings of the queues at and above RX and TX,
# which a resize to RX and TX queues deletes.
save_doomed_queues() {
	local j f
	for ((j = $1; j < Q_RX; j++)); do
		for f in rps_cpus rps_flow_cnt; do save_file "$NETDIR/queues/rx-$j/$f"; done
	done
	for ((j = $2; j < Q_TX; j++)); do
		for f in xps_cpus xps_rxqs; do save_file "$NETDIR/queues/tx-$j/$f"; done
	done
}

save_file() {
	if read_file "$1"; then state_save file "$1" "$FILE"; fi
}

step_size() {
	local -a args=()
	case $CH_MODE in
	combined)
		T_RX=$((N < CH_MAX_COMB ? N : CH_MAX_COMB))
		T_TX=$T_RX
		if ((CH_COMB != T_RX)); then args=(combined "$T_RX"); fi
		if ((T_RX < N)); then
			add_gap "queues: $N loops, but $DEV has at most $CH_MAX_COMB" \
				"software RPS spreads each queue over the loop CPUs; queue i's IRQ still goes to loop i's CPU"
		fi
		;;
	rxtx)
		T_RX=$((N < CH_MAX_RX ? N : CH_MAX_RX))
		T_TX=$((N < CH_MAX_TX ? N : CH_MAX_TX))
		if ((CH_RX != T_RX || CH_TX != T_TX)); then args=(rx "$T_RX" tx "$T_TX"); fi
		if ((T_RX < N)); then
			add_gap "queues: $N loops, but $DEV has at most $CH_MAX_RX rx queues" \
				"software RPS spreads each queue over the loop CPUs; queue i's IRQ still goes to loop i's CPU"
		fi
		;;
	*)
		T_RX=$Q_RX
		T_TX=$Q_TX
		if ((T_RX != N)); then
			add_gap "queues: $N loops, and ethtool cannot change $DEV's $Q_RX rx queues" \
				"software RPS spreads each queue over the loop CPUs"
		fi
		;;
	esac
	if ((${#args[@]} == 0)); then
		# Already sized: the queues are what sysfs lists (with traffic classes there can be more
		# TX queues than channels).
		T_RX=$Q_RX
		T_TX=$Q_TX
		return 0
	fi
	if ((DRY)); then
		RESIZE_PENDING=1
		run_change "$(channels_now)" "$ETHTOOL" -L "$DEV" "${args[@]}"
		return 0
	fi
	save_doomed_queues "$T_RX" "$T_TX"
	state_save channels "$DEV" "$(channels_now)"
	if ! run_change "$(channels_now)" "$ETHTOOL" -L "$DEV" "${args[@]}"; then
		state_unsave
		die_step "resize the queues (ethtool -L $DEV ${args[*]}): $WRITE_ERR"
	fi
	read_channels
	count_queues
	T_RX=$Q_RX
	T_TX=$Q_TX
}

step_find_irqs() {
	local q
	local -a irqs=()
	HAS_IRQS=0
	PIN_IRQS=()
	if ((!RESIZE_PENDING)); then find_queue_irqs; fi
	if ((MAX_IRQ_QUEUE >= 0)); then HAS_IRQS=1; fi
	if ((T_RX != N || !HAS_IRQS)); then SOFTWARE=1; else SOFTWARE=0; fi
	if ((!HAS_IRQS)); then
		add_gap "irqs: no per-queue IRQs found for $DEV (driver $DRIVER; virtual devices have none)" \
			"software RPS/RFS over the loop CPUs"
		return 0
	fi
	# Before a pending resize only the queues that exist and stay can be judged.
	local upto
	upto=$((T_RX < N ? T_RX : N))
	if ((RESIZE_PENDING && Q_RX < upto)); then upto=$Q_RX; fi
	for ((q = 0; q < upto; q++)); do
		if [[ -z ${QIRQ[$q]:-} ]]; then
			add_gap "irqs: no IRQ found for queue $q of $DEV" "its interrupts run wherever the kernel puts them"
			continue
		fi
		read -ra irqs <<<"${QIRQ[$q]}"
		if ((!RESIZE_PENDING)); then PIN_IRQS+=("${irqs[@]}"); fi
	done
}

step_irqbalance() {
	((HAS_IRQS && IRQB_RUNNING)) || return 0
	case $IRQB_MODE in
	ignore)
		add_gap "irqbalance: running and left alone (--irqbalance ignore)" \
			"it may move the pinned IRQs off the loops' CPUs"
		;;
	stop)
		state_save service irqbalance active
		if ! run_change "irqbalance active" "$SYSTEMCTL" stop irqbalance; then
			state_unsave
			die_step "stop irqbalance: $WRITE_ERR"
		fi
		;;
	ban) irqbalance_ban ;;
	esac
}

irqbalance_ban() {
	if [[ -z $IRQB_CONF ]]; then
		add_gap "irqbalance: running, with no $ETC/default/irqbalance or $ETC/sysconfig/irqbalance to ban IRQs in" \
			"pass --irqbalance stop, or it may move the pinned IRQs"
		return 0
	fi
	if ((RESIZE_PENDING)); then
		CHANGES=$((CHANGES + 1))
		say "would add --banirq=IRQ for the queue IRQs found after the resize to IRQBALANCE_ARGS in $IRQB_CONF (now banned: ${IRQB_BANNED[*]:-none})"
		run_change "irqbalance active" "$SYSTEMCTL" restart irqbalance
		return 0
	fi
	local irq b args line value new copy content
	local -A banned=()
	local -a add=()
	for b in "${IRQB_BANNED[@]}"; do banned[$b]=1; done
	for irq in "${PIN_IRQS[@]}"; do
		if [[ -z ${banned[$irq]:-} ]]; then add+=("--banirq=$irq"); fi
	done
	((${#add[@]})) || return 0
	args=$(irqbalance_args)
	line=${args%%$'\t'*}
	value=${args#*$'\t'}
	new="IRQBALANCE_ARGS=\"${value}${value:+ }${add[*]}\""
	CHANGES=$((CHANGES + 1))
	if ((DRY)); then
		say "would write $new > $IRQB_CONF (now ${args:+IRQBALANCE_ARGS=\"$value\"}${args:-no IRQBALANCE_ARGS})"
		run_change "irqbalance active" "$SYSTEMCTL" restart irqbalance
		return 0
	fi
	copy=$STATE_DIR/$DEV.irqbalance
	state_save conf "$IRQB_CONF" "$copy"
	if ((STATE_ADDED)) && ! cp -p -- "$IRQB_CONF" "$copy"; then
		state_unsave
		die_step "save $IRQB_CONF to $copy"
	fi
	# The new IRQBALANCE_ARGS replaces the last one, or is appended when there is none.
	if ! content=$(NEW=$new awk -v n="${line:-0}" 'NR == n { print ENVIRON["NEW"]; next } { print } END { if (n == 0) print ENVIRON["NEW"] }' "$IRQB_CONF"); then
		die_step "edit $IRQB_CONF"
	fi
	if ! WRITE_ERR=$({ printf '%s\n' "$content" >"$IRQB_CONF"; } 2>&1); then
		die_step "write $IRQB_CONF: ${WRITE_ERR##*: }"
	fi
	say "write $new > $IRQB_CONF (was ${args:+IRQBALANCE_ARGS=\"$value\"}${args:-no IRQBALANCE_ARGS})"
	if ! run_change "irqbalance active" "$SYSTEMCTL" restart irqbalance; then
		die_step "restart irqbalance: $WRITE_ERR"
	fi
}

step_pin() {
	local i irq mask rc
	local -a irqs=()
	if ((RESIZE_PENDING)); then
		if ((HAS_IRQS)); then
			for ((i = 0; i < T_RX && i < N; i++)); do
				CHANGES=$((CHANGES + 1))
				cpu_mask "${CPUS[i]}"
				say "would pin the IRQs of queue $i (numbered by the resize) to CPU ${CPUS[i]}: $MASK"
			done
		fi
		return 0
	fi
	for ((i = 0; i < T_RX && i < N; i++)); do
		cpu_mask "${CPUS[i]}"
		mask=$MASK
		read -ra irqs <<<"${QIRQ[$i]:-}"
		for irq in "${irqs[@]}"; do
			rc=0
			set_value "$PROC/irq/$irq/smp_affinity" "$mask" mask || rc=$?
			if ((rc != 0)); then
				add_gap "irq $irq (queue $i): the kernel refused affinity $mask (a kernel-managed IRQ?): $WRITE_ERR" \
					"it stays where the kernel puts it; RFS moves its flows to the loop's CPU"
			fi
		done
	done
}

step_ntuple() {
	case $NTUPLE in
	on) ;;
	off)
		state_save ntuple "$DEV" off
		if ! run_change "ntuple off" "$ETHTOOL" -K "$DEV" ntuple on; then
			state_unsave
			die_step "turn ntuple on (ethtool -K $DEV ntuple on): $WRITE_ERR"
		fi
		;;
	*)
		add_gap "ntuple: $([[ $NTUPLE == fixed ]] && printf 'fixed off on' || printf 'not supported by') $DEV (no accelerated RFS)" \
			"RFS in software: a flow is moved to its loop's CPU after the IRQ"
		;;
	esac
}

must_set() {
	local rc=0
	set_value "$@" || rc=$?
	case $rc in
	0) ;;
	2) die_step "read $1" ;;
	*) die_step "write $2 > $1: $WRITE_ERR" ;;
	esac
}

step_flow_tables() {
	local want entries per j
	pow2_ceil "$FLOW_ENTRIES"
	want=$POW2
	entries=$want
	if ((GLOBAL_VISIBLE)); then
		if ((GLOBAL_VAL < want)); then
			must_set "$GLOBAL_PATH" "$want" int
		else
			entries=$GLOBAL_VAL
		fi
	else
		add_gap "rps_sock_flow_entries: not visible here (a child network namespace?)" \
			"per-queue flow tables only; set net.core.rps_sock_flow_entries=$want on the host"
	fi
	((T_RX > 0)) || return 0
	pow2_ceil $(((entries + T_RX - 1) / T_RX))
	per=$POW2
	for ((j = 0; j < T_RX; j++)); do
		must_set "$NETDIR/queues/rx-$j/rps_flow_cnt" "$per" int
	done
}

step_rps() {
	local mask=0 j
	if ((SOFTWARE)); then
		cpu_mask "${CPUS[@]}"
		mask=$MASK
	fi
	for ((j = 0; j < T_RX; j++)); do
		must_set "$NETDIR/queues/rx-$j/rps_cpus" "$mask" mask
	done
}

step_xps() {
	local i rc unsupported=0
	((!NO_XPS)) || return 0
	for ((i = 0; i < T_TX && i < N; i++)); do
		rc=0
		cpu_mask "${CPUS[i]}"
		set_value "$NETDIR/queues/tx-$i/xps_cpus" "$MASK" mask || rc=$?
		case $rc in
		0) ;;
		2) unsupported=$((unsupported + 1)) ;;
		*) die_step "write $MASK > $NETDIR/queues/tx-$i/xps_cpus: $WRITE_ERR" ;;
		esac
	done
	if ((unsupported)); then
		if ((T_TX == 1)); then
			add_gap "xps: $DEV has one TX queue and no XPS map (tx-0/xps_cpus cannot be read)" \
				"every loop transmits on that queue"
		else
			add_gap "xps: $unsupported of $DEV's TX queues have no readable xps_cpus" \
				"those queues are picked by hash"
		fi
	fi
}

run_plan() {
	step_size
	step_find_irqs
	step_irqbalance
	step_pin
	step_ntuple
	step_flow_tables
	step_rps
	step_xps
}

# cpus_list: prints the loop CPUs, comma-separated.
cpus_list() {
	local IFS=,
	printf '%s' "${CPUS[*]}"
}

print_gaps() {
	local g
	for g in "${GAPS[@]}"; do
		printf 'gap: %s; instead: %s\n' "${g%%$'\t'*}" "${g#*$'\t'}"
	done
}

# take_lock: one apply or restore at a time. Two at once would each save as "original" what the
# other had just written, or restore values the other is changing. The lock is flock(1) on the
# state directory itself, held until the script exits; a dry run takes none.
take_lock() {
	if ((DRY)); then return 0; fi
	if ! command -v flock >/dev/null; then
		die_usage "needs flock(1) (util-linux) to keep two runs apart"
	fi
	if ! { mkdir -p "$STATE_DIR" && chmod 0700 "$STATE_DIR"; }; then
		die_usage "cannot create the state directory $STATE_DIR"
	fi
	exec {LOCK_FD}<"$STATE_DIR"
	if ! flock -n "$LOCK_FD"; then
		printf '%s: another apply or restore is running (it holds a lock on %s); nothing was changed\n' \
			"$PROG" "$STATE_DIR" >&2
		exit 4
	fi
}

# need_root MESSAGE: exits with MESSAGE unless this is a dry run, the script runs as root, or a
# test hook replaces /sys or /proc.
need_root() {
	if ((!DRY && EUID != 0)) && [[ -z ${TUNE_NIC_SYS:-}${TUNE_NIC_PROC:-} ]]; then
		die_usage "$1"
	fi
}

apply() {
	need_root "applying needs root (--check and --dry-run do not)"
	take_lock
	gather
	say "$PROG: $DEV ($DRIVER): $N loops on CPUs $(cpus_list)"
	run_plan
	print_gaps
	if ((DRY)); then
		say "$PROG: dry run: $CHANGES changes would be made, none were"
	elif ((CHANGES == 0)); then
		say "$PROG: nothing to change"
	else
		say "$PROG: done: $CHANGES changes; undo them with: $PROG --restore --dev $DEV"
	fi
}

# ---- check ---------------------------------------------------------------------------------

json_str() {
	local s=$1
	s=${s//\\/\\\\}
	s=${s//\"/\\\"}
	s=${s//$'\n'/\\n}
	s=${s//$'\t'/\\t}
	s=${s//[[:cntrl:]]/}
	printf '"%s"' "$s"
}

# json_list ITEM...: prints a JSON array of the (already encoded) items.
json_list() {
	local IFS=,
	printf '[%s]' "$*"
}

check() {
	gather
	# The verdict comes from the plan as a silent dry run, so check and apply cannot disagree.
	DRY=1 QUIET=1
	run_plan
	QUIET=0
	if ((JSON)); then check_json; else check_text; fi
	if ((${#GAPS[@]})); then exit 2; fi
	exit 0
}

queue_files() {
	local j f
	for ((j = 0; j < Q_RX; j++)); do
		printf 'rx %d' "$j"
		for f in rps_cpus rps_flow_cnt; do
			read_file "$NETDIR/queues/rx-$j/$f" '?' || true
			printf ' %s' "$FILE"
		done
		printf '\n'
	done
	for ((j = 0; j < Q_TX; j++)); do
		read_file "$NETDIR/queues/tx-$j/xps_cpus" '?' || true
		printf 'tx %d %s\n' "$j" "$FILE"
	done
}

check_text() {
	local q irq kind j a b
	local -a irqs=()
	printf 'device: %s\n' "$DEV"
	printf 'driver: %s\n' "$DRIVER"
	printf 'loops: %d on CPUs %s\n' "$N" "$(cpus_list)"
	case $CH_MODE in
	combined) printf 'queues: combined %d (max %d)\n' "$CH_COMB" "$CH_MAX_COMB" ;;
	rxtx) printf 'queues: rx %d tx %d (max rx %d tx %d)\n' "$CH_RX" "$CH_TX" "$CH_MAX_RX" "$CH_MAX_TX" ;;
	*) printf 'queues: %d rx, %d tx (ethtool cannot change them)\n' "$Q_RX" "$Q_TX" ;;
	esac
	if ((MAX_IRQ_QUEUE < 0)); then printf 'irqs: none found\n'; fi
	for ((q = 0; q <= MAX_IRQ_QUEUE; q++)); do
		read -ra irqs <<<"${QIRQ[$q]:-}"
		for irq in "${irqs[@]}"; do
			read_file "$PROC/irq/$irq/smp_affinity" '?' || true
			printf 'irq %s: queue %d (%s) affinity %s\n' "$irq" "$q" "${IRQ_NAME[$irq]}" "$FILE"
		done
	done
	case $NTUPLE in
	on) printf 'ntuple: on (accelerated RFS)\n' ;;
	off) printf 'ntuple: off (settable: apply turns it on for accelerated RFS)\n' ;;
	fixed) printf 'ntuple: fixed off (no accelerated RFS)\n' ;;
	*) printf 'ntuple: not supported (no accelerated RFS)\n' ;;
	esac
	printf 'irqbalance: %s; config %s; banned IRQs: %s\n' \
		"$( ((IRQB_RUNNING)) && printf running || printf 'not running')" \
		"${IRQB_CONF:-none}" "${IRQB_BANNED[*]:-none}"
	if ((GLOBAL_VISIBLE)); then
		printf 'rps_sock_flow_entries: %s\n' "$GLOBAL_VAL"
	else
		printf 'rps_sock_flow_entries: not visible here\n'
	fi
	while read -r kind j a b; do
		if [[ $kind == rx ]]; then
			printf 'rx-%d: rps_cpus %s rps_flow_cnt %s\n' "$j" "$a" "$b"
		else
			printf 'tx-%d: xps_cpus %s\n' "$j" "$( [[ $a == '?' ]] && printf 'unreadable (no XPS)' || printf '%s' "$a")"
		fi
	done < <(queue_files)
	printf 'steering: %s\n' "$( ((SOFTWARE)) && printf 'software RPS/RFS over the loop CPUs' || printf 'hardware: queue i and its IRQ on loop i'"'"'s CPU')"
	if ((${#GAPS[@]} == 0)); then
		printf 'verdict: the full hardware recipe applies\n'
	else
		printf 'verdict: the full hardware recipe does not apply\n'
		print_gaps
	fi
}

check_json() {
	local q irq kind j a b g
	local -a irqs=() items=() rx=() tx=() gaps=() cpus=() bans=()
	for ((q = 0; q <= MAX_IRQ_QUEUE; q++)); do
		read -ra irqs <<<"${QIRQ[$q]:-}"
		for irq in "${irqs[@]}"; do
			read_file "$PROC/irq/$irq/smp_affinity" || true
			items+=("{\"irq\":$irq,\"queue\":$q,\"name\":$(json_str "${IRQ_NAME[$irq]}"),\"affinity\":$(json_str "$FILE")}")
		done
	done
	while read -r kind j a b; do
		if [[ $kind == rx ]]; then
			rx+=("{\"queue\":$j,\"rps_cpus\":$(json_str "$a"),\"rps_flow_cnt\":$(json_str "$b")}")
		elif [[ $a == '?' ]]; then
			tx+=("{\"queue\":$j,\"xps_cpus\":null}")
		else
			tx+=("{\"queue\":$j,\"xps_cpus\":$(json_str "$a")}")
		fi
	done < <(queue_files)
	for g in "${GAPS[@]}"; do
		gaps+=("{\"reason\":$(json_str "${g%%$'\t'*}"),\"instead\":$(json_str "${g#*$'\t'}")}")
	done
	cpus=("${CPUS[@]}")
	bans=("${IRQB_BANNED[@]}")
	local queues
	case $CH_MODE in
	combined) queues="{\"mode\":\"combined\",\"max\":$CH_MAX_COMB,\"current\":$CH_COMB}" ;;
	rxtx) queues="{\"mode\":\"rxtx\",\"max_rx\":$CH_MAX_RX,\"max_tx\":$CH_MAX_TX,\"rx\":$CH_RX,\"tx\":$CH_TX}" ;;
	*) queues="{\"mode\":\"fixed\",\"rx\":$Q_RX,\"tx\":$Q_TX}" ;;
	esac
	printf '{"device":%s,"driver":%s,"loops":%s,"queues":%s,"target_queues":%d,"irqs":%s,"ntuple":%s,' \
		"$(json_str "$DEV")" "$(json_str "$DRIVER")" "$(json_list "${cpus[@]}")" "$queues" "$T_RX" \
		"$(json_list "${items[@]}")" "$(json_str "$NTUPLE")"
	printf '"irqbalance":{"running":%s,"config":%s,"banned":%s},' \
		"$( ((IRQB_RUNNING)) && printf true || printf false)" \
		"$([[ -n $IRQB_CONF ]] && json_str "$IRQB_CONF" || printf null)" "$(json_list "${bans[@]}")"
	printf '"rps_sock_flow_entries":%s,"rx_queues":%s,"tx_queues":%s,"software_steering":%s,"applies":%s,"gaps":%s}\n' \
		"$( ((GLOBAL_VISIBLE)) && printf '%d' "$GLOBAL_VAL" || printf null)" \
		"$(json_list "${rx[@]}")" "$(json_list "${tx[@]}")" \
		"$( ((SOFTWARE)) && printf true || printf false)" \
		"$( ((${#GAPS[@]})) && printf false || printf true)" "$(json_list "${gaps[@]}")"
}

# ---- restore -------------------------------------------------------------------------------

restore() {
	local kind key value now rc fails=0
	local -a parts=() files=()
	if [[ -z $DEV ]]; then
		files=("$STATE_DIR"/*.state)
		case ${#files[@]} in
		0)
			printf '%s: nothing to restore (no state in %s)\n' "$PROG" "$STATE_DIR"
			exit 0
			;;
		1)
			DEV=${files[0]##*/}
			DEV=${DEV%.state}
			;;
		*) die_usage "state is saved for several devices in $STATE_DIR: pass --dev" ;;
		esac
	fi
	check_dev_name
	NETDIR=$SYS/class/net/$DEV
	STATE_FILE=$STATE_DIR/$DEV.state
	need_root "restoring needs root (--dry-run does not)"
	if [[ ! -f $STATE_FILE ]]; then
		printf '%s: nothing to restore for %s (no %s)\n' "$PROG" "$DEV" "$STATE_FILE"
		exit 0
	fi
	take_lock
	if [[ ! -f $STATE_FILE ]]; then
		printf '%s: nothing to restore for %s (another run restored it)\n' "$PROG" "$DEV"
		exit 0
	fi
	while IFS=$'\t' read -r kind key value; do
		case $kind in
		file)
			if [[ ! -e $key ]]; then
				say "skip: $key no longer exists"
				continue
			fi
			rc=0
			restore_value "$key" "$value" || rc=$?
			if ((rc)); then
				printf '%s: restore %s > %s: %s\n' "$PROG" "$value" "$key" "$WRITE_ERR" >&2
				fails=$((fails + 1))
			fi
			;;
		channels)
			read_channels
			now=$(channels_now)
			[[ $now == "$value" ]] && continue
			read -ra parts <<<"$value"
			if ! run_change "$now" "$ETHTOOL" -L "$DEV" "${parts[@]}"; then
				printf '%s: restore the queues (ethtool -L %s %s): %s\n' "$PROG" "$DEV" "$value" "$WRITE_ERR" >&2
				fails=$((fails + 1))
			fi
			;;
		ntuple)
			read_ntuple
			[[ $NTUPLE == "$value" ]] && continue
			if ! run_change "ntuple $NTUPLE" "$ETHTOOL" -K "$DEV" ntuple "$value"; then
				printf '%s: restore ntuple %s: %s\n' "$PROG" "$value" "$WRITE_ERR" >&2
				fails=$((fails + 1))
			fi
			;;
		conf)
			if ! restore_conf "$key" "$value"; then
				printf '%s: restore %s from %s: %s\n' "$PROG" "$key" "$value" "$WRITE_ERR" >&2
				fails=$((fails + 1))
			fi
			;;
		service)
			read_irqbalance
			if [[ $value == active ]] && ((!IRQB_RUNNING)); then
				if ! run_change "irqbalance stopped" "$SYSTEMCTL" start irqbalance; then
					printf '%s: start irqbalance: %s\n' "$PROG" "$WRITE_ERR" >&2
					fails=$((fails + 1))
				fi
			fi
			;;
		*)
			printf '%s: skip an unknown record in %s: %s\n' "$PROG" "$STATE_FILE" "$kind" >&2
			;;
		esac
	done < <(tac -- "$STATE_FILE")
	if ((DRY)); then
		say "$PROG: dry run: $CHANGES changes would be made, none were"
		exit 0
	fi
	if ((fails)); then
		printf '%s: %d values could not be restored; %s is kept, so --restore can be run again\n' \
			"$PROG" "$fails" "$STATE_FILE" >&2
		exit 3
	fi
	rm -f -- "$STATE_FILE" "$STATE_DIR/$DEV.irqbalance"
	say "$PROG: restored $DEV ($CHANGES changes)"
}

# restore_value PATH VALUE: writes VALUE back to PATH unless it is there already.
restore_value() {
	local path=$1 value=$2 now
	read_file "$path" '?' || true
	now=$FILE
	# Compared as text: the kernel prints a value one way, so a saved value that reads differently
	# (a mask at another width on a fake tree) is written back.
	if [[ $now == "$value" ]]; then return 0; fi
	CHANGES=$((CHANGES + 1))
	if ((DRY)); then
		say "would write $value > $path (now $now)"
		return 0
	fi
	if ! WRITE_ERR=$({ printf '%s\n' "$value" >"$path"; } 2>&1); then
		WRITE_ERR=${WRITE_ERR##*: }
		return 1
	fi
	say "write $value > $path (was $now)"
}

# restore_conf PATH COPY: puts the saved irqbalance config back and restarts irqbalance, when
# running, so that it drops the bans.
restore_conf() {
	local path=$1 copy=$2
	if [[ ! -f $copy ]]; then
		WRITE_ERR="the saved copy is missing"
		return 1
	fi
	if [[ -f $path && "$(<"$copy")" == "$(<"$path")" ]]; then return 0; fi
	CHANGES=$((CHANGES + 1))
	if ((DRY)); then
		say "would copy $copy > $path (and restart irqbalance if it runs)"
		return 0
	fi
	if ! WRITE_ERR=$({ cat -- "$copy" >"$path"; } 2>&1); then return 1; fi
	say "write $copy > $path"
	read_irqbalance
	if ((IRQB_RUNNING)); then
		run_change "irqbalance active" "$SYSTEMCTL" restart irqbalance || return 1
	fi
}

# ---- main ----------------------------------------------------------------------------------

main() {
	local saw_check=0 saw_restore=0
	while (($#)); do
		case $1 in
		--check) saw_check=1 ;;
		--restore) saw_restore=1 ;;
		--json) JSON=1 ;;
		--dry-run) DRY=1 ;;
		--no-xps)
			NO_XPS=1
			SAW_APPLY_OPT=1
			;;
		--dev | --cpus | --irqbalance | --flow-entries)
			if (($# < 2)); then die_usage "$1 needs a value"; fi
			set_opt "$1" "$2"
			shift
			;;
		--dev=* | --cpus=* | --irqbalance=* | --flow-entries=*) set_opt "${1%%=*}" "${1#*=}" ;;
		-h | --help)
			usage
			exit 0
			;;
		*) die_usage "unknown argument '$1'" ;;
		esac
		shift
	done
	if ((saw_check && saw_restore)); then die_usage "--check and --restore exclude each other"; fi
	if ((saw_check)); then MODE=check; elif ((saw_restore)); then MODE=restore; fi
	if ((JSON)) && [[ $MODE != check ]]; then die_usage "--json goes with --check"; fi
	if ((DRY)) && [[ $MODE == check ]]; then die_usage "--check changes nothing already; --dry-run is for apply and restore"; fi
	if [[ $MODE == restore ]] && { [[ -n $CPUS_ARG ]] || ((SAW_APPLY_OPT)); }; then
		die_usage "--restore takes only --dev and --dry-run"
	fi
	case $MODE in
	check)
		resolve_dev
		resolve_cpus
		check
		;;
	apply)
		if [[ -z $CPUS_ARG ]]; then die_usage "--cpus LIST is required to apply (or use --check)"; fi
		resolve_dev
		resolve_cpus
		apply
		;;
	restore) restore ;;
	esac
}

# set_opt OPTION VALUE: checks and stores the value of an option that takes one.
set_opt() {
	case $1 in
	--irqbalance | --flow-entries) SAW_APPLY_OPT=1 ;;
	esac
	case $1 in
	--dev) DEV=$2 ;;
	--cpus)
		if [[ -z $2 ]]; then die_usage "--cpus needs a CPU list"; fi
		CPUS_ARG=$2
		;;
	--irqbalance)
		case $2 in
		ban | stop | ignore) IRQB_MODE=$2 ;;
		*) die_usage "--irqbalance takes ban, stop or ignore, not '$2'" ;;
		esac
		;;
	--flow-entries)
		if [[ ! $2 =~ ^[0-9]{1,10}$ ]] || (($((10#$2)) < 1 || 10#$2 > MAX_FLOW_ENTRIES)); then
			die_usage "--flow-entries takes a number from 1 to $MAX_FLOW_ENTRIES, not '$2'"
		fi
		FLOW_ENTRIES=$((10#$2))
		;;
	esac
}

main "$@"
