package gangnet

import (
	"context"
	"fmt"
	"net"
	"runtime"

	"golang.org/x/sys/unix"
)

// Netns is an Opener for a container's network namespace, named by its
// path (/proc/PID/ns/net). A socket belongs to the namespace of the
// thread that made it, for good: each socket is made on a locked thread
// moved into the namespace, which is then moved back and unlocked. A
// thread that cannot be moved back stays locked, so it ends with its
// goroutine and no other goroutine ever runs in the container's
// namespace. (Letting every such thread end would also signal any child
// started from it with Pdeathsig.) Entering another network namespace
// needs CAP_SYS_ADMIN: a daemon without it cannot open one, and says so.
type Netns string

// Listen listens on addr inside the namespace.
func (ns Netns) Listen(addr string) (net.Listener, error) {
	var ln net.Listener
	err := ns.do(func() (err error) {
		ln, err = net.Listen("tcp", addr)
		return err
	})
	return ln, err
}

// Dial connects to addr inside the namespace.
func (ns Netns) Dial(ctx context.Context, addr string) (net.Conn, error) {
	var c net.Conn
	err := ns.do(func() (err error) {
		var d net.Dialer
		c, err = d.DialContext(ctx, "tcp", addr)
		return err
	})
	return c, err
}

func (ns Netns) do(f func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		home, err := unix.Open("/proc/thread-self/ns/net", unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			runtime.UnlockOSThread() // nothing changed yet
			errc <- fmt.Errorf("this thread's network namespace: %w", err)
			return
		}
		defer unix.Close(home)
		fd, err := unix.Open(string(ns), unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			runtime.UnlockOSThread()
			errc <- fmt.Errorf("container network namespace: %w", err)
			return
		}
		defer unix.Close(fd)
		if err := unix.Setns(fd, unix.CLONE_NEWNET); err != nil {
			runtime.UnlockOSThread()
			errc <- fmt.Errorf("enter the container's network namespace (the daemon needs CAP_SYS_ADMIN): %w", err)
			return
		}
		errc <- f()
		if unix.Setns(home, unix.CLONE_NEWNET) == nil {
			runtime.UnlockOSThread() // back home: fit for any goroutine again
		} // else: stays locked and ends with this goroutine
	}()
	return <-errc
}
