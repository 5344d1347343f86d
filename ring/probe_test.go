package ring

import (
	"errors"
	"slices"
	"strings"
	"testing"
)

func mustProbe(t *testing.T) *Support {
	t.Helper()
	s, err := Probe()
	if errors.Is(err, ErrUnavailable) {
		skipUnavailable(t, err)
	}
	if err != nil {
		t.Fatalf("Probe: %v", err)
	}
	return s
}

func TestProbe(t *testing.T) {
	s := mustProbe(t)
	ops := s.Supported()
	for _, op := range []Op{OpRecv, OpSend, OpAccept} {
		if !slices.Contains(ops, op) || !s.Has(op) {
			t.Errorf("Supported() = %v lacks %v (Has: %v)", ops, op, s.Has(op))
		}
	}
	if err := s.Require(OpRecv, OpSend, OpAccept); err != nil {
		t.Errorf("Require(RECV, SEND, ACCEPT): %v", err)
	}
	err := s.Require(OpRecv, Op(250))
	if !errors.Is(err, ErrUnavailable) {
		t.Fatalf("Require(Op(250)) = %v, want an unavailable error", err)
	}
	var ue *UnavailableError
	if !errors.As(err, &ue) || !strings.Contains(ue.Feature, "OP(250)") || !errors.Is(err, errors.ErrUnsupported) {
		t.Errorf("Require(Op(250)) = %v, want it to name OP(250) and wrap ErrUnsupported", err)
	}
	again := mustProbe(t)
	if again != s {
		t.Errorf("second Probe returned %p, first %p: the probe is not cached", again, s)
	}
}

func TestOpString(t *testing.T) {
	tests := []struct {
		op   Op
		want string
	}{
		{OpRecv, "RECV"},
		{OpAsyncCancel, "ASYNC_CANCEL"},
		{OpMsgRing, "MSG_RING"},
		{Op(250), "OP(250)"},
	}
	for _, tt := range tests {
		t.Run(tt.want, func(t *testing.T) {
			if got := tt.op.String(); got != tt.want {
				t.Errorf("Op(%d).String() = %q, want %q", uint8(tt.op), got, tt.want)
			}
		})
	}
}
