package gateway

import (
	"bytes"
	"encoding/json"
)

// Usage is the token count an OpenAI-style service reports in a
// response's "usage" object: at the end of a JSON answer, and in the last
// chunk of a stream (stream_options.include_usage; the test model server
// always sends it).
type Usage struct {
	PromptTokens     uint64 `json:"prompt_tokens"`
	CompletionTokens uint64 `json:"completion_tokens"`
	TotalTokens      uint64 `json:"total_tokens"`
}

// maxUsageObject bounds what the scanner keeps of one usage object; a
// longer one is ignored.
const maxUsageObject = 1 << 10

var usageKey = []byte(`"usage"`)

// usageScanner finds "usage": {...} objects in a body as it streams past,
// keeping at most maxUsageObject bytes, and remembers the last one that
// parses (a stream may send usage more than once, cumulatively, or null in
// every chunk but the last). Inside a JSON string a quote is escaped, so
// the raw bytes "usage" followed by a colon can only be a key.
type usageScanner struct {
	state      int
	carry      []byte // the tail of the stream while searching, < len(usageKey)
	obj        []byte
	depth      int
	inStr, esc bool
	last       Usage
	found      bool
}

const (
	searching = iota
	afterKey
	afterColon
	capturing
)

func (s *usageScanner) Write(p []byte) {
	for len(p) > 0 {
		switch s.state {
		case searching:
			if len(s.carry) > 0 {
				j := append(s.carry, p[:min(len(p), len(usageKey)-1)]...)
				if i := bytes.Index(j, usageKey); i >= 0 {
					p = p[i+len(usageKey)-len(s.carry):]
					s.carry, s.state = s.carry[:0], afterKey
					continue
				}
			}
			if i := bytes.Index(p, usageKey); i >= 0 {
				p = p[i+len(usageKey):]
				s.carry, s.state = s.carry[:0], afterKey
				continue
			}
			s.carry = append(s.carry, p[max(0, len(p)-len(usageKey)+1):]...)
			if k := len(usageKey) - 1; len(s.carry) > k {
				s.carry = append(s.carry[:0], s.carry[len(s.carry)-k:]...)
			}
			return
		case afterKey, afterColon:
			c := p[0]
			p = p[1:]
			switch {
			case c == ' ' || c == '\t' || c == '\r' || c == '\n':
			case s.state == afterKey && c == ':':
				s.state = afterColon
			case s.state == afterColon && c == '{':
				s.obj = append(s.obj[:0], c)
				s.depth, s.inStr, s.esc, s.state = 1, false, false, capturing
			default: // null, or not a key after all
				s.state = searching
			}
		case capturing:
			for i, c := range p {
				switch {
				case s.esc:
					s.esc = false
				case s.inStr && c == '\\':
					s.esc = true
				case c == '"':
					s.inStr = !s.inStr
				case !s.inStr && c == '{':
					s.depth++
				case !s.inStr && c == '}':
					s.depth--
				}
				if s.depth == 0 {
					s.obj = append(s.obj, p[:i+1]...)
					s.parse()
					p = p[i+1:]
					s.state = searching
					break
				}
			}
			if s.state == capturing {
				s.obj = append(s.obj, p...)
				p = nil
				if len(s.obj) > maxUsageObject {
					s.state = searching
				}
			}
		}
	}
}

func (s *usageScanner) parse() {
	var u Usage
	if len(s.obj) > maxUsageObject || json.Unmarshal(s.obj, &u) != nil {
		return
	}
	if u.TotalTokens == 0 {
		u.TotalTokens = u.PromptTokens + u.CompletionTokens
	}
	s.last, s.found = u, true
}

// Usage returns the last usage object seen.
func (s *usageScanner) Usage() (Usage, bool) { return s.last, s.found }
