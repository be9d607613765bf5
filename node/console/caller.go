package console

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sync/atomic"

	"github.com/gleaner-net/gleaner/node/rpc"
)

// InProcess is a Caller that hands each call to the RPC server's own
// handler in this process: no socket, but the same authorisation,
// decoding, limits and encoding as a call from the CLI, so a page shows
// byte for byte what the RPC answers.
func InProcess(api http.Handler, token string) Caller {
	return &inProcess{api: api, auth: "Bearer " + token}
}

type inProcess struct {
	api  http.Handler
	auth string
	id   atomic.Uint64
}

type rpcRequest struct {
	JSONRPC string `json:"jsonrpc"`
	ID      uint64 `json:"id"`
	Method  string `json:"method"`
	Params  any    `json:"params,omitempty"`
}

type rpcResponse struct {
	Result json.RawMessage `json:"result"`
	Error  *rpc.Error      `json:"error"`
}

func (c *inProcess) Call(ctx context.Context, method string, params, result any) error {
	body, err := json.Marshal(rpcRequest{JSONRPC: "2.0", ID: c.id.Add(1), Method: method, Params: params})
	if err != nil {
		return fmt.Errorf("rpc %s: encoding request: %w", method, err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://127.0.0.1/", bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", c.auth)
	req.Header.Set("Content-Type", "application/json")
	w := &buffer{h: http.Header{}}
	c.api.ServeHTTP(w, req)
	var r rpcResponse
	if err := json.Unmarshal(w.b.Bytes(), &r); err != nil {
		return fmt.Errorf("rpc %s: HTTP %d: malformed response: %w", method, w.code, err)
	}
	if r.Error != nil {
		return r.Error
	}
	if result == nil {
		return nil
	}
	if err := json.Unmarshal(r.Result, result); err != nil {
		return fmt.Errorf("rpc %s: decoding result: %w", method, err)
	}
	return nil
}

// buffer is the ResponseWriter an in-process call writes its reply to.
type buffer struct {
	h    http.Header
	code int
	b    bytes.Buffer
}

func (b *buffer) Header() http.Header { return b.h }
func (b *buffer) Write(p []byte) (int, error) {
	if b.code == 0 {
		b.code = http.StatusOK
	}
	return b.b.Write(p)
}
func (b *buffer) WriteHeader(code int) {
	if b.code == 0 {
		b.code = code
	}
}
