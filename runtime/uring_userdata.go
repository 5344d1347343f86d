//go:build linux

package runtime

// The io_uring driver's user data: every submission carries kind (8 bits)
// | generation (24 bits) | slot (32 bits), never a Go pointer, so that a
// completion finds its connection, listener, datagram socket or file
// operation in a slab (the loop's slots, the file table) and a stale one
// (its slot reused) is told apart by the generation. Every kind is here.

// The kinds of the connections, the listeners and the loop itself.
const (
	kindAccept uint8 = iota + 1
	kindAcceptPoll
	kindAcceptCancel
	kindRecv
	kindSend
	kindClose
	kindCancel
	kindShutdown
	kindConnect
	kindWake
	kindMsgWake      // another loop's MSG_RING: a wake-up without the eventfd
	kindMsgSent      // this loop's MSG_RING was posted (or failed)
	kindPacketRecv   // a datagram socket's multishot recvmsg (slot: its listener index)
	kindPacketSend   // a sendmsg of a datagram (slot: its send slot)
	kindPacketCancel // the cancel of a datagram socket's receive
	kindCloseSlot    // the close of a connection's slot in the fixed file table (uring_fixed.go)
	kindSlotDrop     // the close of a slot accepted into while the loop stopped (slot: the table's)
	kindInstall      // a slot's FIXED_FD_INSTALL (slot: the install's sequence number)
	kindSendZC       // a zero-copy send, both completions (slot and gen: its record's, uring_zc.go)
)

// The file kinds (uring_file.go) carry the slot and generation of the
// operation in the loop's file table, or of the connection whose file send
// they move (sendfile.go); the loop itself runs the send's second splice,
// of the pipe into the socket, without the ring (uringDriver.spliceOut).
const (
	kindFile       uint8 = 0x40 + iota // a file operation
	kindFileSync                       // the fdatasync linked to a write
	kindSplice                         // a file send's splice of the file into its pipe
	kindSplicePoll                     // a file send waiting for its socket to take more
)

func userData(kind uint8, slot, gen uint32) uint64 {
	return uint64(kind)<<56 | uint64(gen&genMask)<<32 | uint64(slot)
}
