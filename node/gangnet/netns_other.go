//go:build !linux

package gangnet

import (
	"context"
	"errors"
	"net"
)

// Netns is an Opener for a container's network namespace: Linux only.
type Netns string

var errNoNetns = errors.New("a container's network namespace can be entered on Linux only")

func (Netns) Listen(string) (net.Listener, error)            { return nil, errNoNetns }
func (Netns) Dial(context.Context, string) (net.Conn, error) { return nil, errNoNetns }
