package rpc

import "time"

// CallObserver is told of every call the server ran or refused: the
// method's name ("" for a method not registered, or a request too broken
// to name one), how long it took, and the JSON-RPC error code (0 for a
// result). A subscription's call is its set-up, not its life. It runs on
// the caller's goroutine after the call, so it must be quick.
type CallObserver func(method string, d time.Duration, code int)

// Observe sets the server's CallObserver (nil: none). Meant for start-up,
// like registration; safe at any time. Only registered names reach it,
// so a client cannot invent label values.
func (s *Server) Observe(o CallObserver) {
	if o == nil {
		s.observe.Store(nil)
		return
	}
	s.observe.Store(&o)
}

func observeCall(o CallObserver, s *Server, r *request, start time.Time, res *result) {
	name := ""
	if r.err == nil && s.lookup(r.method) != nil {
		name = r.method
	}
	code := 0
	if res.err != nil {
		code = res.err.Code
	}
	o(name, time.Since(start), code)
}
