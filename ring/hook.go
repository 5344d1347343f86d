package ring

// openHook lets tests make ring setup fail as a locked-down host would
// (seccomp returns EPERM): when it returns an error, Open and Probe fail with
// it, classified as usual. It is nil-safe and returns nil in production.
var openHook = func() error { return nil }

// SetOpenHook replaces the setup hook and returns a function that restores
// the previous one. It exists for tests of the backend fallback; it is not
// safe to call while rings are being opened.
func SetOpenHook(h func() error) (restore func()) {
	old := openHook
	openHook = h
	return func() { openHook = old }
}
