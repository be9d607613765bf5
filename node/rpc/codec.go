package rpc

import (
	"encoding/json"
	"errors"
)

// request is one decoded call. A request whose err is set was not a valid
// JSON-RPC request object; it still gets a reply (with its id when the id
// itself was valid), as the spec requires.
type request struct {
	id     json.RawMessage // nil: notification; otherwise the id bytes verbatim
	method string
	params json.RawMessage // nil when absent or null
	err    *Error
}

// notification reports whether the call must not be answered.
func (r *request) notification() bool { return r.id == nil && r.err == nil }

// envelope keeps every member raw so a wrongly typed member is reported as
// -32600 on that call instead of failing the whole decode.
type envelope struct {
	JSONRPC json.RawMessage `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Method  json.RawMessage `json:"method"`
	Params  json.RawMessage `json:"params"`
}

// decodeRequest splits a POST body or WebSocket message into calls. A non-nil
// *Error means the whole message gets that single error reply (id null):
// unparsable JSON, an empty batch or a batch over maxBatch.
func decodeRequest(body []byte, maxBatch int) (reqs []request, batch bool, err *Error) {
	body = trimSpace(body)
	if len(body) > 0 && body[0] == '[' {
		var elems []json.RawMessage
		if json.Unmarshal(body, &elems) != nil {
			return nil, false, errParse
		}
		if len(elems) == 0 {
			return nil, false, errEmptyBatch
		}
		if len(elems) > maxBatch {
			return nil, false, Errorf(CodeInvalidRequest, "invalid request: batch of %d calls exceeds limit of %d", len(elems), maxBatch)
		}
		reqs = make([]request, len(elems))
		for i, el := range elems {
			reqs[i] = decodeOne(el)
		}
		return reqs, true, nil
	}
	r := decodeOne(body)
	if r.err != nil && r.err.Code == CodeParse {
		return nil, false, r.err
	}
	return []request{r}, false, nil
}

func decodeOne(raw []byte) request {
	var env envelope
	if err := json.Unmarshal(raw, &env); err != nil || string(raw) == "null" {
		var se *json.SyntaxError
		if errors.As(err, &se) {
			return request{err: errParse}
		}
		return request{err: invalidRequest("request must be a JSON object")}
	}
	var r request
	// The id is checked first so that later errors can echo it.
	if env.ID != nil {
		if !validID(env.ID) {
			return request{err: invalidRequest(`"id" must be a string, number or null`)}
		}
		r.id = env.ID
	}
	if string(env.JSONRPC) != `"2.0"` {
		var v string
		if json.Unmarshal(env.JSONRPC, &v) != nil || v != "2.0" {
			r.err = invalidRequest(`"jsonrpc" must be "2.0"`)
			return r
		}
	}
	if len(env.Method) == 0 || env.Method[0] != '"' || json.Unmarshal(env.Method, &r.method) != nil {
		r.err = invalidRequest(`"method" must be a string`)
		return r
	}
	switch {
	case len(env.Params) == 0 || string(env.Params) == "null":
	case env.Params[0] == '{' || env.Params[0] == '[':
		r.params = env.Params
	default:
		r.err = invalidRequest(`"params" must be an object or an array`)
	}
	return r
}

func invalidRequest(msg string) *Error {
	return &Error{Code: CodeInvalidRequest, Message: "invalid request: " + msg}
}

// validID accepts the id kinds the spec allows. The bytes are already known
// to be one valid JSON value, so the first byte decides.
func validID(id json.RawMessage) bool {
	switch c := id[0]; {
	case c == '"', c == '-', c >= '0' && c <= '9':
		return true
	default:
		return string(id) == "null"
	}
}

func trimSpace(b []byte) []byte {
	for len(b) > 0 && isSpace(b[0]) {
		b = b[1:]
	}
	for len(b) > 0 && isSpace(b[len(b)-1]) {
		b = b[:len(b)-1]
	}
	return b
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

// appendResponse writes members in the fixed order jsonrpc, id,
// result|error by hand, so replies are byte-stable for golden files and the
// hot path does not marshal an envelope via reflection.
func appendResponse(buf []byte, id json.RawMessage, result []byte, e *Error) []byte {
	buf = append(buf, `{"jsonrpc":"2.0","id":`...)
	if id == nil {
		buf = append(buf, "null"...)
	} else {
		buf = append(buf, id...)
	}
	if e != nil {
		buf = append(buf, `,"error":`...)
		buf = append(buf, marshalError(e)...)
	} else {
		buf = append(buf, `,"result":`...)
		buf = append(buf, result...)
	}
	return append(buf, '}')
}

// marshalError drops Data that cannot be encoded rather than losing the
// whole error.
func marshalError(e *Error) []byte {
	b, err := json.Marshal(e)
	if err != nil {
		b, _ = json.Marshal(&Error{Code: e.Code, Message: e.Message})
	}
	return b
}
