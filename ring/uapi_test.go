package ring

import (
	"reflect"
	"testing"
)

// TestUAPILayout checks ring's copies of the kernel's structures against
// include/uapi/linux/io_uring.h: each one's size, and the offset of every
// field ring reads or writes. (oracle_test.go checks them against giouring
// too; this test needs no giouring.)
func TestUAPILayout(t *testing.T) {
	tests := []struct {
		typ     reflect.Type
		size    uintptr
		offsets map[string]uintptr
	}{
		{reflect.TypeFor[sqe](), 64, map[string]uintptr{
			"opcode": 0, "flags": 1, "ioprio": 2, "fd": 4, "off": 8, "addr": 16, "len": 24,
			"opFlags": 28, "userData": 32, "bufGroup": 40, "personality": 42, "spliceFdIn": 44, "addr3": 48,
		}},
		{reflect.TypeFor[cqe](), 16, map[string]uintptr{"userData": 0, "res": 8, "flags": 12}},
		{reflect.TypeFor[sqOffsets](), 40, map[string]uintptr{
			"head": 0, "tail": 4, "ringMask": 8, "ringEntries": 12, "flags": 16, "dropped": 20, "array": 24, "userAddr": 32,
		}},
		{reflect.TypeFor[cqOffsets](), 40, map[string]uintptr{
			"head": 0, "tail": 4, "ringMask": 8, "ringEntries": 12, "overflow": 16, "cqes": 20, "flags": 24, "userAddr": 32,
		}},
		{reflect.TypeFor[params](), 120, map[string]uintptr{
			"sqEntries": 0, "cqEntries": 4, "flags": 8, "sqThreadCPU": 12, "sqThreadIdle": 16, "features": 20,
			"wqFd": 24, "sqOff": 40, "cqOff": 80,
		}},
		{reflect.TypeFor[getEventsArg](), 24, map[string]uintptr{"sigmask": 0, "sigmaskSz": 8, "minWait": 12, "ts": 16}},
		{reflect.TypeFor[bufDesc](), 16, map[string]uintptr{"addr": 0, "len": 8, "bid": 12, "resv": 14}},
		{reflect.TypeFor[bufReg](), 40, map[string]uintptr{"ringAddr": 0, "ringEntries": 8, "bgid": 12, "flags": 14}},
		{reflect.TypeFor[probeOp](), 8, map[string]uintptr{"op": 0, "flags": 2}},
		{reflect.TypeFor[probeArg](), 16 + probeOps*8, map[string]uintptr{"lastOp": 0, "opsLen": 1, "ops": 16}},
		{reflect.TypeFor[rsrcUpdate](), 16, map[string]uintptr{"offset": 0, "resv": 4, "data": 8}},
		{reflect.TypeFor[rsrcRegister](), 32, map[string]uintptr{"nr": 0, "flags": 4, "resv2": 8, "data": 16, "tags": 24}},
		// struct io_uring_napi: busy_poll_to, prefer_busy_poll, then
		// pad[3] and resv (liburing's copy) or opcode, pad[2],
		// op_param and resv (the kernel's since 6.13): 16 bytes.
		{reflect.TypeFor[napiReg](), 16, map[string]uintptr{
			"busyPollTo": 0, "preferBusyPoll": 4, "opcode": 5, "pad": 6, "opParam": 8, "resv": 12,
		}},
	}
	for _, tt := range tests {
		t.Run(tt.typ.Name(), func(t *testing.T) {
			if tt.typ.Size() != tt.size {
				t.Errorf("%v is %d bytes, the kernel's is %d", tt.typ, tt.typ.Size(), tt.size)
			}
			for name, want := range tt.offsets {
				f, ok := tt.typ.FieldByName(name)
				if !ok {
					t.Errorf("%v has no field %s", tt.typ, name)
					continue
				}
				if f.Offset != want {
					t.Errorf("%v.%s is at %d, the kernel's at %d", tt.typ, name, f.Offset, want)
				}
			}
		})
	}
}
