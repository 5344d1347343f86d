//go:build linux

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

// The io_uring syscalls that set rings up, swapped by this package's tests
// to inject failures after a ring exists (a probe that cannot be read, a
// registration the kernel refuses) and to see what ring passes. Like
// openHook, they are not swapped while rings are being opened.
var (
	sysSetup    = setupSyscall
	sysRegister = registerSyscall
)
