//go:build linux

package runtime

import (
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"

	"github.com/percore/percore/internal/sys"
	"github.com/percore/percore/listener"
)

// Sockets handed in from outside, and handed on: systemd's socket
// activation (LISTEN_PID, LISTEN_FDS, LISTEN_FDNAMES), and the same
// protocol between a process and the copy of itself that replaces it (a
// zero-downtime restart, docs/operations.md). The protocol is small enough
// to implement here rather than depend on coreos/go-systemd
// (docs/decisions/0021).

// listenFdsStart is the first descriptor systemd passes (SD_LISTEN_FDS_START).
const listenFdsStart = 3

// The environment of the protocol. A process started by systemd sees
// LISTEN_PID set to its own PID; a process started by a percore parent
// (HandoverEnv) sees PERCORE_LISTEN_PARENT set to its parent's PID
// instead, since a parent using os/exec cannot know the child's PID before
// the child runs. Either way the variables are meant for that one process:
// ListenFiles unsets them, so that its own children do not take the
// descriptors for theirs.
const (
	envListenPID    = "LISTEN_PID"
	envListenFds    = "LISTEN_FDS"
	envListenNames  = "LISTEN_FDNAMES"
	envListenParent = "PERCORE_LISTEN_PARENT"
)

// ListenFiles returns the sockets this process was given: by systemd's
// socket activation (LISTEN_PID is this process), or by a percore parent
// handing its listeners over (PERCORE_LISTEN_PARENT is the parent, see
// HandoverEnv). Each file is named by LISTEN_FDNAMES when it is set (as
// systemd's FileDescriptorName=), else "LISTEN_FD_N". It returns nil when
// nothing was passed to this process, and an error when the variables are
// malformed. It unsets the variables and marks the descriptors
// close-on-exec, as coreos/go-systemd's activation.Files(true) does. Pass
// the result as Config.Inherited; New duplicates what it serves, so the files
// may be closed after New returns.
func ListenFiles() ([]*os.File, error) {
	defer func() {
		os.Unsetenv(envListenPID)
		os.Unsetenv(envListenFds)
		os.Unsetenv(envListenNames)
		os.Unsetenv(envListenParent)
	}()
	switch {
	case os.Getenv(envListenPID) != "":
		pid, err := strconv.Atoi(os.Getenv(envListenPID))
		if err != nil {
			return nil, fmt.Errorf("percore: %s=%q: %w", envListenPID, os.Getenv(envListenPID), err)
		}
		if pid != os.Getpid() {
			return nil, nil // meant for another process (our parent)
		}
	case os.Getenv(envListenParent) != "":
		pid, err := strconv.Atoi(os.Getenv(envListenParent))
		if err != nil {
			return nil, fmt.Errorf("percore: %s=%q: %w", envListenParent, os.Getenv(envListenParent), err)
		}
		if pid != os.Getppid() {
			return nil, nil
		}
	default:
		return nil, nil
	}
	n, err := strconv.Atoi(os.Getenv(envListenFds))
	if err != nil || n < 0 {
		return nil, fmt.Errorf("percore: %s=%q is not a count of descriptors", envListenFds, os.Getenv(envListenFds))
	}
	var names []string
	if v := os.Getenv(envListenNames); v != "" {
		names = strings.Split(v, ":")
	}
	files := make([]*os.File, 0, n)
	for i := range n {
		fd := listenFdsStart + i
		if err := sys.IsOpen(fd); err != nil {
			for _, f := range files {
				f.Close()
			}
			return nil, fmt.Errorf("percore: %s=%d but descriptor %d is not open: %w", envListenFds, n, fd, err)
		}
		sys.SetCloseOnExec(fd)
		name := "LISTEN_FD_" + strconv.Itoa(fd)
		if i < len(names) && names[i] != "" {
			name = names[i]
		}
		files = append(files, os.NewFile(uintptr(fd), name))
	}
	return files, nil
}

// HandoverEnv returns the environment entries that make files, passed to a
// child process as its descriptors 3, 4, ... (exec.Cmd.ExtraFiles), what
// ListenFiles returns in the child: LISTEN_FDS, LISTEN_FDNAMES (the files'
// names) and PERCORE_LISTEN_PARENT (this process). Append them to the
// child's environment, without any LISTEN_PID of this process's own.
func HandoverEnv(files []*os.File) []string {
	names := make([]string, len(files))
	for i, f := range files {
		names[i] = strings.ReplaceAll(f.Name(), ":", "_")
	}
	return []string{
		envListenFds + "=" + strconv.Itoa(len(files)),
		envListenNames + "=" + strings.Join(names, ":"),
		envListenParent + "=" + strconv.Itoa(os.Getpid()),
	}
}

// socketRef is one loop's own listening socket, kept for ListenerFiles.
type socketRef struct {
	info *Listener
	ln   *listener.Listener
}

// ListenerFiles returns duplicates of every listening socket the runtime
// serves (what Config.Inherited takes in the new process), for a
// process that takes over from this one (pass them with HandoverEnv): each
// loop's own SO_REUSEPORT socket of every TCP and UDP address (one file
// per loop), and each shared socket once. Sockets handed over this way
// are never closed while one process still holds them, so no connection
// waiting in an accept queue is lost when this process shuts down: the new
// one accepts it. A Unix listener's socket file is kept when this runtime
// closes (the new process serves it). Call ListenerFiles while the runtime
// serves, before Shutdown; the caller closes the files once the child has
// them. A call that meets a shutdown under way fails with net.ErrClosed
// (each socket's duplicate is ordered with its loop closing it).
func (rt *Runtime) ListenerFiles() ([]*os.File, error) {
	rt.sockMu.Lock()
	defer rt.sockMu.Unlock()
	var files []*os.File
	fail := func(err error) ([]*os.File, error) {
		for _, f := range files {
			f.Close()
		}
		return nil, fmt.Errorf("percore: listener files: %w", err)
	}
	dup := func(fd int, info *Listener) error {
		if fd < 0 {
			return fmt.Errorf("listener %s: %w", info, net.ErrClosed)
		}
		d, err := sys.DupCloexec(fd)
		if err != nil {
			return fmt.Errorf("listener %s: %w", info, os.NewSyscallError("fcntl", err))
		}
		files = append(files, os.NewFile(uintptr(d), info.String()))
		return nil
	}
	for _, s := range rt.specs {
		if s.info.Shared {
			if err := dup(s.shared, s.info); err != nil {
				return fail(err)
			}
			if s.unix != nil {
				s.unix.KeepPath()
			}
			continue
		}
		for _, ref := range rt.sockets {
			if ref.info == s.info {
				// A loop may be closing its socket now (a shutdown
				// began): Dup is ordered with that Close.
				d, err := ref.ln.Dup()
				if err != nil {
					return fail(fmt.Errorf("listener %s: %w", s.info, err))
				}
				files = append(files, os.NewFile(uintptr(d), s.info.String()))
			}
		}
	}
	return files, nil
}

// closeShared closes the runtime's own descriptors of shared sockets (each
// loop closes its duplicate as it stops): a Unix listener's file is
// removed here, first, so that new clients find nothing to connect to.
func (rt *Runtime) closeShared() {
	rt.sockMu.Lock()
	defer rt.sockMu.Unlock()
	if err := closeSpecs(rt.specs); err != nil {
		rt.cfg.Logger.Error("percore: close shared listener", "err", err)
		rt.sharedErr = errors.Join(rt.sharedErr, err)
	}
}

// listenerList is the listeners for the start-up log line.
func listenerList(lns []*Listener) string {
	var b strings.Builder
	for i, ln := range lns {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(ln.String())
	}
	return b.String()
}
