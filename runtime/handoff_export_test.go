package runtime

// HandoffStates returns the states of a hand-over message's records (the
// fault tests' proxy reads them).
func HandoffStates(msg []byte) ([]string, error) {
	_, recs, err := decodeHandoff(msg, nil)
	var out []string
	for _, r := range recs {
		out = append(out, string(r.state))
	}
	return out, err
}

// EncodeHandoff builds a hand-over message of records with these states
// (listener name ln), for the malformed-input tests.
func EncodeHandoff(seq uint32, ln string, states ...string) []byte {
	b := appendHeader(nil, seq, len(states))
	for _, s := range states {
		b = appendRecord(b, ln, []byte(s))
	}
	return b
}
