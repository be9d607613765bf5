package rpc

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"sync"
	"time"

	"github.com/gorilla/websocket"
)

const (
	maxSubscriptions = 32               // per connection
	maxInflight      = 16               // concurrent calls per connection; the reader waits beyond this
	writeWait        = 10 * time.Second // a peer that cannot take a frame this long is dead
)

// wsConn is one WebSocket connection. Only writeLoop writes to ws; every
// other goroutine hands it frames through out, which keeps writes
// serialised without a lock around the socket.
type wsConn struct {
	srv    *Server
	ws     *websocket.Conn
	ctx    context.Context // cancelled when the connection ends, taking every subscription with it
	cancel context.CancelFunc
	out    chan []byte
	wg     sync.WaitGroup // calls and pumps

	mu   sync.Mutex // guards subs
	subs map[string]*subscription
}

func (s *Server) serveWS(w http.ResponseWriter, r *http.Request) {
	ws, err := s.upgrader.Upgrade(w, r, nil)
	if err != nil {
		return // Upgrade has already answered with an HTTP error
	}
	ctx, cancel := context.WithCancel(context.WithoutCancel(r.Context()))
	c := &wsConn{srv: s, ws: ws, ctx: ctx, cancel: cancel, out: make(chan []byte, 16), subs: map[string]*subscription{}}
	writerDone := make(chan struct{})
	go func() { c.writeLoop(); close(writerDone) }()
	c.readLoop()
	cancel()
	c.wg.Wait()
	<-writerDone
	ws.Close()
}

func (c *wsConn) readLoop() {
	ws, wait := c.ws, 2*c.srv.keepalive
	ws.SetReadLimit(c.srv.maxBytes)
	ws.SetReadDeadline(time.Now().Add(wait))
	ws.SetPongHandler(func(string) error { return ws.SetReadDeadline(time.Now().Add(wait)) })
	sem := make(chan struct{}, maxInflight)
	ctx := withConn(c.ctx, c)
	for {
		_, msg, err := ws.ReadMessage()
		if err != nil {
			return
		}
		ws.SetReadDeadline(time.Now().Add(wait))
		select {
		case sem <- struct{}{}:
		case <-c.ctx.Done():
			return
		}
		c.wg.Add(1)
		go func() {
			defer func() { <-sem; c.wg.Done() }()
			out, starts := c.srv.process(ctx, msg, c)
			if out != nil && !c.send(out) {
				return
			}
			for _, start := range starts {
				start()
			}
		}()
	}
}

func (c *wsConn) writeLoop() {
	ping := time.NewTicker(c.srv.keepalive)
	defer ping.Stop()
	for {
		var err error
		select {
		case msg := <-c.out:
			c.ws.SetWriteDeadline(time.Now().Add(writeWait))
			err = c.ws.WriteMessage(websocket.TextMessage, msg)
		case <-ping.C:
			err = c.ws.WriteControl(websocket.PingMessage, nil, time.Now().Add(writeWait))
		case <-c.ctx.Done():
			return
		}
		if err != nil {
			c.cancel()
			c.ws.Close() // unblocks readLoop
			return
		}
	}
}

// send queues a frame for the writer; false once the connection is gone.
func (c *wsConn) send(msg []byte) bool {
	select {
	case c.out <- msg:
		return true
	case <-c.ctx.Done():
		return false
	}
}

// subscription is one live subscription; its pump goroutine is the only
// sender of its notifications.
type subscription struct {
	id     string
	conn   *wsConn
	ctx    context.Context // the handler's ctx
	cancel context.CancelFunc
	exited chan struct{} // closed when the pump has returned
}

func (c *wsConn) newSubscription() (*subscription, *Error) {
	var b [16]byte
	rand.Read(b[:])
	ctx, cancel := context.WithCancel(c.ctx)
	sub := &subscription{id: hex.EncodeToString(b[:]), conn: c, ctx: ctx, cancel: cancel, exited: make(chan struct{})}
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.subs) >= maxSubscriptions {
		cancel()
		return nil, Errorf(CodeTooManySubscriptions, "too many subscriptions: limit is %d per connection", maxSubscriptions)
	}
	c.subs[sub.id] = sub
	return sub, nil
}

func (sub *subscription) start(run func(*subscription)) {
	sub.conn.wg.Add(1)
	go func() {
		defer sub.conn.wg.Done()
		defer sub.discard()
		run(sub)
	}()
}

// discard releases the slot and cancels the handler's ctx. It runs exactly
// once: when the pump returns, or instead of starting one.
func (sub *subscription) discard() {
	sub.cancel()
	sub.conn.mu.Lock()
	delete(sub.conn.subs, sub.id)
	sub.conn.mu.Unlock()
	close(sub.exited)
}

// unsubscribe cancels the subscription and waits for its pump to stop, so
// no event for it follows the reply to "unsubscribe".
func (c *wsConn) unsubscribe(id string) bool {
	c.mu.Lock()
	sub := c.subs[id]
	c.mu.Unlock()
	if sub == nil {
		return false
	}
	sub.cancel()
	<-sub.exited
	return true
}

// pump forwards events to the connection through a bounded queue. A
// subscriber that falls subQueue events behind is ended with an error
// notification rather than silently losing events: market state derived
// from a stream with holes would be wrong, and the client can resubscribe
// and resync.
func pump[E any](sub *subscription, events <-chan E) {
	c, limit := sub.conn, sub.conn.srv.subQueue
	var queue [][]byte
	for {
		var out chan<- []byte
		var head []byte
		if len(queue) > 0 {
			out, head = c.out, queue[0]
		}
		select {
		case ev, ok := <-events:
			if !ok {
				for _, msg := range queue {
					if !sub.send(msg) {
						return
					}
				}
				sub.send(sub.final(nil))
				return
			}
			if len(queue) >= limit {
				sub.send(sub.final(Errorf(CodeSlowSubscriber, "subscriber too slow: %d events queued", limit)))
				return
			}
			b, err := json.Marshal(ev)
			if err != nil {
				sub.send(sub.final(Errorf(CodeInternal, "encoding event: %v", err)))
				return
			}
			queue = append(queue, sub.notification(b))
		case out <- head:
			queue = queue[1:]
		case <-sub.ctx.Done():
			return
		}
	}
}

func (sub *subscription) send(msg []byte) bool {
	select {
	case sub.conn.out <- msg:
		return true
	case <-sub.ctx.Done():
		return false
	}
}

func (sub *subscription) notification(result []byte) []byte {
	b := append([]byte(`{"jsonrpc":"2.0","method":"subscription","params":{"subscription":"`), sub.id...)
	b = append(append(append(b, `","result":`...), result...), "}}"...)
	return b
}

// final is the last notification of a subscription: done, with the error
// that ended it, if any.
func (sub *subscription) final(e *Error) []byte {
	b := append([]byte(`{"jsonrpc":"2.0","method":"subscription","params":{"subscription":"`), sub.id...)
	b = append(b, `","done":true`...)
	if e != nil {
		b = append(append(b, `,"error":`...), marshalError(e)...)
	}
	return append(b, "}}"...)
}
