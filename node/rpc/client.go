package rpc

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync/atomic"

	"github.com/gorilla/websocket"
)

// ErrUnreachable is wrapped by Client errors when the endpoint could not be
// dialled at all (typically: the node is not running).
var ErrUnreachable = errors.New("rpc endpoint unreachable")

const maxResponseBytes = 64 << 20

// Client calls a Server over HTTP POST, and over WebSocket for
// subscriptions. It is safe for concurrent use and keeps connections alive.
type Client struct {
	url  string
	auth string
	http *http.Client
	ws   websocket.Dialer
	id   atomic.Uint64
}

// NewClient returns a client for url, e.g. "http://127.0.0.1:5001" as the
// node writes it to its rpc.url file.
func NewClient(url, token string) *Client {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.Proxy = nil // the node is local; an HTTP(S)_PROXY in the environment must not capture it
	tr.MaxIdleConnsPerHost = 32
	return &Client{
		url:  strings.TrimRight(url, "/"),
		auth: "Bearer " + token,
		http: &http.Client{Transport: tr},
		ws:   websocket.Dialer{HandshakeTimeout: websocket.DefaultDialer.HandshakeTimeout},
	}
}

type clientRequest struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      uint64          `json:"id"`
	Method  string          `json:"method"`
	Params  json.RawMessage `json:"params,omitempty"`
}

type clientResponse struct {
	ID     json.RawMessage `json:"id"`
	Result json.RawMessage `json:"result"`
	Error  *Error          `json:"error"`
}

// Call invokes method with params (a struct, map or slice; nil for none)
// and decodes the result into result (a pointer; nil to discard). A
// JSON-RPC error comes back as *Error.
func (c *Client) Call(ctx context.Context, method string, params any, result any) error {
	raw, err := marshalParams(params)
	if err != nil {
		return err
	}
	res, err := c.CallRaw(ctx, method, raw)
	if err != nil || result == nil {
		return err
	}
	if err := json.Unmarshal(res, result); err != nil {
		return fmt.Errorf("rpc %s: decoding result: %w", method, err)
	}
	return nil
}

func marshalParams(params any) (json.RawMessage, error) {
	if params == nil {
		return nil, nil
	}
	b, err := json.Marshal(params)
	if err != nil {
		return nil, fmt.Errorf("rpc: encoding params: %w", err)
	}
	return b, nil
}

// CallRaw is Call without the JSON encoding of params and result.
func (c *Client) CallRaw(ctx context.Context, method string, params json.RawMessage) (json.RawMessage, error) {
	body, err := json.Marshal(clientRequest{JSONRPC: "2.0", ID: c.id.Add(1), Method: method, Params: params})
	if err != nil {
		return nil, fmt.Errorf("rpc: encoding request: %w", err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.url+"/", bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", c.auth)
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, c.transportError(err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxResponseBytes))
	if err != nil {
		return nil, fmt.Errorf("rpc %s: reading response: %w", method, err)
	}
	var r clientResponse
	if err := json.Unmarshal(data, &r); err != nil {
		return nil, fmt.Errorf("rpc %s: HTTP %d: malformed response: %w", method, resp.StatusCode, err)
	}
	if r.Error != nil {
		return nil, r.Error
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("rpc %s: unexpected HTTP status %s", method, resp.Status)
	}
	return r.Result, nil
}

// transportError marks dial failures with ErrUnreachable so the CLI can
// say "is the node running?" instead of printing a socket error.
func (c *Client) transportError(err error) error {
	var op *net.OpError
	if errors.As(err, &op) && op.Op == "dial" {
		return fmt.Errorf("%w at %s: %w", ErrUnreachable, c.url, err)
	}
	return fmt.Errorf("rpc %s: %w", c.url, err)
}

type clientNotification struct {
	Method string `json:"method"`
	Params struct {
		Subscription string          `json:"subscription"`
		Result       json.RawMessage `json:"result"`
		Done         bool            `json:"done"`
	} `json:"params"`
}

// Subscribe opens a WebSocket, calls the subscription method and delivers
// each event's result. The channel closes when the server ends the
// subscription, ctx is done, or the connection drops; cancelling ctx also
// closes the connection, which ends the subscription on the server.
func (c *Client) Subscribe(ctx context.Context, method string, params any) (<-chan json.RawMessage, error) {
	raw, err := marshalParams(params)
	if err != nil {
		return nil, err
	}
	wsURL := "ws" + strings.TrimPrefix(c.url, "http") + "/ws"
	ws, resp, err := c.ws.DialContext(ctx, wsURL, http.Header{"Authorization": {c.auth}})
	if err != nil {
		if resp != nil {
			var r clientResponse
			if json.NewDecoder(io.LimitReader(resp.Body, 1<<16)).Decode(&r) == nil && r.Error != nil {
				return nil, r.Error
			}
		}
		return nil, c.transportError(err)
	}
	stop := context.AfterFunc(ctx, func() { ws.Close() }) // unblocks reads below
	fail := func(err error) (<-chan json.RawMessage, error) {
		stop()
		ws.Close()
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, err
	}
	if err := ws.WriteJSON(clientRequest{JSONRPC: "2.0", ID: 1, Method: method, Params: raw}); err != nil {
		return fail(fmt.Errorf("rpc %s: %w", method, err))
	}
	// The server queues the reply before the first event, so the first
	// message is the reply.
	var r clientResponse
	if err := ws.ReadJSON(&r); err != nil {
		return fail(fmt.Errorf("rpc %s: %w", method, err))
	}
	if r.Error != nil {
		return fail(r.Error)
	}
	var id string
	if err := json.Unmarshal(r.Result, &id); err != nil {
		return fail(fmt.Errorf("rpc %s: subscription id: %w", method, err))
	}
	ch := make(chan json.RawMessage)
	go func() {
		defer close(ch)
		defer ws.Close()
		defer stop()
		for {
			var n clientNotification
			if err := ws.ReadJSON(&n); err != nil {
				return
			}
			if n.Method != "subscription" || n.Params.Subscription != id {
				continue
			}
			if n.Params.Done {
				return
			}
			select {
			case ch <- n.Params.Result:
			case <-ctx.Done():
				return
			}
		}
	}()
	return ch, nil
}
